"""Architecture guards: import direction and freshness of generated protobuf code."""

from __future__ import annotations

import filecmp
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("package", ["secure", "celu"])
def test_protocol_packages_never_import_grpc(package: str) -> None:
    code = (
        "import importlib, pkgutil, sys\n"
        f"import {package}\n"
        f"for m in pkgutil.walk_packages({package}.__path__, '{package}.'):\n"
        "    importlib.import_module(m.name)\n"
        "bad = [m for m in sys.modules if m == 'grpc' or m.startswith(('grpc.', 'party', "
        "'coordinator'))]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert out.stdout.strip() == "", f"{package} pulled in {out.stdout.strip()}"


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
