"""Architecture guards: import direction and freshness of generated protobuf code."""

from __future__ import annotations

import ast
import filecmp
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


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


@pytest.mark.parametrize("package", ["secure", "celu"])
def test_protocol_packages_never_import_grpc(package: str) -> None:
    daemons = ("grpc", "prometheus_client", "party", "coordinator")
    bad = [m for m in _modules_loaded_by(package) if _within(m, daemons)]
    assert bad == [], f"{package} pulled in {bad}"


def test_paillier_engine_needs_no_wire_or_channel() -> None:
    """The primitives layer: integers and arrays in, integers and arrays out."""
    loaded = _modules_loaded_by("secure.paillier")
    bad = [m for m in loaded if _within(m, ("proto", "secure.channel", "grpc"))]
    assert bad == [], f"secure.paillier pulled in {bad}"


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every absolute import in a module, at any depth."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def test_coordinator_daemon_never_imports_party() -> None:
    """Only the `vfl` command (coordinator/cli/) may start or import party daemons."""
    cli = REPO / "coordinator" / "cli"
    daemon = [p for p in (REPO / "coordinator").rglob("*.py") if cli not in p.parents]
    bad = [
        f"{path.relative_to(REPO)}:{line} imports {module}"
        for path in sorted(daemon)
        for line, module in _imports(path)
        if _within(module, ("party",))
    ]
    assert bad == [], f"the coordinator daemon imports the party package: {bad}"


def test_generated_protobuf_code_is_fresh(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools")
    (tmp_path / "proto").mkdir()
    for proto in (REPO / "proto").glob("*.proto"):
        shutil.copy(proto, tmp_path / "proto")
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
            *[f"proto/{p.name}" for p in (REPO / "proto").glob("*.proto")],
        ],
        cwd=tmp_path,
        check=True,
    )
    for gen in (tmp_path / "proto").glob("*_pb2*.py*"):
        if gen.name == "common_pb2_grpc.py":
            continue
        checked_in = REPO / "proto" / gen.name
        assert checked_in.exists() and filecmp.cmp(gen, checked_in, shallow=False), (
            f"proto/{gen.name} is stale: run scripts/gen_protos.sh"
        )
