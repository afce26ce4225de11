"""Architecture guards: which part may import which, and freshness of generated code.

The parts, bottom up (each may import only the parts listed for it):

    proto     generated messages: nothing of ours
    celu      CELU-VFL: nothing of ours
    secure    BlindFL, Paillier, PSI, PKI: the generated messages
    rpc       vfl.rpc, gRPC plumbing and serde: messages, secure (the PKI)
    contract  job spec, states, logs, shared errors: messages, celu (the spec's section)
    coordinator  the coordinator daemon
    party     the party daemon; of the coordinator only its client
    attack    `vfl attack`'s analysis of recorded views: the party's view readers below
    api       the public Python API (`vfl`, `vfl.local`): everything below
    cli       the `vfl` command, a shell over the API: anything but the coordinator

The two daemons are peers over the contract: neither imports the other's daemon.
"""

from __future__ import annotations

import ast
import filecmp
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# part -> the parts it may import ("coordinator.client": that module only)
ALLOWED: dict[str, set[str]] = {
    "proto": set(),
    "celu": set(),
    "secure": {"proto"},
    "rpc": {"proto", "secure"},
    "contract": {"proto", "celu"},
    "coordinator": {"proto", "rpc", "secure", "celu", "contract"},
    "party": {"proto", "rpc", "secure", "celu", "contract", "coordinator.client"},
    "attack": {"proto", "rpc", "secure", "celu", "contract", "party"},
    "cli": {"proto", "rpc", "secure", "celu", "contract", "party", "api", "attack"},
    "api": {"proto", "rpc", "secure", "celu", "contract", "coordinator"},
}
FOLDERS = (
    "proto",
    "rpc",
    "contract",
    "party",
    "coordinator",
    "secure",
    "celu",
    "cli",
    "attack",
    "vfl",
)


def _part(module: str) -> str:
    """The part a `vfl.…` module belongs to."""
    names = module.split(".")
    if len(names) == 1 or names[1] not in FOLDERS:
        return "api"
    return names[1]


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every absolute import in a module, at any depth."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found += [(node.lineno, node.module)]
            found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return found


def _module_of(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = rel.parts[1:] if rel.parts[0] == "vfl" else rel.parts
    parts = parts[:-1] if parts[-1] == "__init__" else parts
    return ".".join(("vfl", *parts))


def _our_modules() -> list[Path]:
    return [
        p
        for folder in FOLDERS
        for p in sorted((REPO / folder).rglob("*.py"))
        if "_pb2" not in p.name
    ]


def test_every_import_points_down_the_layers() -> None:
    bad = []
    for path in _our_modules():
        here = _part(_module_of(path))
        for line, module in _imports(path):
            where = f"{path.relative_to(REPO)}:{line}"
            if module.split(".")[0] in FOLDERS[:-1]:
                bad.append(f"{where} imports {module}: installed, it is vfl.{module}")
            if not module.startswith("vfl.") or _part(module) in (here, *ALLOWED[here]):
                continue
            if here == "party" and _within(module, ("vfl.coordinator.client",)):
                continue
            bad.append(f"{where}: {here} imports {module} ({_part(module)})")
    assert bad == [], "imports against the layers (this test's docstring):\n" + "\n".join(bad)


def test_the_layers_have_no_cycle() -> None:
    """No part reaches itself through others: the table is a stack."""

    def walk(part: str, path: tuple[str, ...]) -> None:
        for nxt in ALLOWED[part.split(".")[0]]:
            nxt = nxt.split(".")[0]
            assert nxt not in path, f"cycle: {' -> '.join((*path, nxt))}"
            walk(nxt, (*path, nxt))

    for part in ALLOWED:
        walk(part, (part,))


def _modules_loaded_by(package: str) -> list[str]:
    """Every module in sys.modules after importing all of `package`'s modules in a
    fresh interpreter."""
    code = (
        "import importlib, pkgutil, sys\n"
        f"import {package}\n"
        f"for m in pkgutil.walk_packages({package}.__path__, '{package}.'):\n"
        "    importlib.import_module(m.name)\n"
        "print(','.join(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    return out.stdout.strip().split(",")


def _within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(f"{p}.") for p in packages)


@pytest.mark.parametrize("package", ["vfl.secure", "vfl.celu", "vfl.contract"])
def test_protocol_and_contract_packages_never_import_grpc(package: str) -> None:
    daemons = ("grpc", "prometheus_client", "vfl.party", "vfl.coordinator", "vfl.cli")
    bad = [m for m in _modules_loaded_by(package) if _within(m, daemons)]
    assert bad == [], f"{package} pulled in {bad}"


def test_paillier_engine_needs_no_wire_or_channel() -> None:
    """The primitives layer: integers and arrays in, integers and arrays out."""
    loaded = _modules_loaded_by("vfl.secure.paillier")
    bad = [m for m in loaded if _within(m, ("vfl.proto", "vfl.secure.channel", "grpc"))]
    assert bad == [], f"vfl.secure.paillier pulled in {bad}"


def test_a_party_daemon_runs_without_the_coordinator_daemon() -> None:
    """An organisation that runs only a party loads the coordinator's client, nothing
    more of it."""
    loaded = _modules_loaded_by("vfl.party")
    client = {"vfl.coordinator", "vfl.coordinator.client", "vfl.coordinator.errors"}
    bad = [m for m in loaded if _within(m, ("vfl.coordinator", "vfl.cli")) and m not in client]
    assert bad == [], f"vfl.party pulled in {bad}"


def test_generated_protobuf_code_is_fresh(tmp_path: Path) -> None:
    """Compiled as their installed path (`vfl/proto/…`), as scripts/gen_protos.sh does."""
    pytest.importorskip("grpc_tools")
    out = tmp_path / "vfl" / "proto"
    out.mkdir(parents=True)
    for proto in (REPO / "proto").glob("*.proto"):
        shutil.copy(proto, out)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            "-I",
            ".",
            "--python_out=.",
            "--pyi_out=.",
            "--grpc_python_out=.",
            *[f"vfl/proto/{p.name}" for p in (REPO / "proto").glob("*.proto")],
        ],
        cwd=tmp_path,
        check=True,
    )
    for gen in out.glob("*_pb2*.py*"):
        if gen.name == "common_pb2_grpc.py":
            continue
        checked_in = REPO / "proto" / gen.name
        assert checked_in.exists() and filecmp.cmp(gen, checked_in, shallow=False), (
            f"proto/{gen.name} is stale: run scripts/gen_protos.sh"
        )
