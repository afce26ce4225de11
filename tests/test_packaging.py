"""Installed, the platform is one namespace, `vfl`: it claims no top-level name that a
PyPI package uses (proto-plus imports as `proto`, and `secure` is a package too)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib

REPO = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_folder_is_listed_for_installation() -> None:
    folders = {"vfl"}
    for installed, folder in PYPROJECT["package-dir"].items():
        for init in (REPO / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / folder)
            folders.add(".".join((installed, *rel.parts)))
    assert folders == set(PYPROJECT["packages"]), (
        "pyproject.toml [tool.setuptools] packages must list every package: "
        f"missing {sorted(folders - set(PYPROJECT['packages']))}, "
        f"extra {sorted(set(PYPROJECT['packages']) - folders)}"
    )


def test_installs_next_to_proto_plus(tmp_path: Path) -> None:
    """Outside the repository (as a user's notebook runs), `proto` is proto-plus and our
    wire contract is `vfl.proto`; both load, and use each other's protobuf runtime."""
    pytest.importorskip("proto", reason="proto-plus is in the test extra")
    code = (
        "import proto, vfl.proto.party_pb2 as party_pb2, vfl\n"
        "from vfl.proto import coordinator_pb2\n"
        "assert 'site-packages' in proto.__file__, proto.__file__\n"
        "class Row(proto.Message):\n"
        "    id = proto.Field(proto.STRING, number=1)\n"
        "assert Row(id='x').id == 'x'\n"
        "assert party_pb2.PredictRequest(ids=['x']).ids == ['x']\n"
        "assert coordinator_pb2.JobState.Name(coordinator_pb2.JOB_STATE_TRAINING)\n"
        "print(proto.__name__, vfl.proto.__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["proto", "vfl.proto"]


def test_a_built_wheel_holds_only_the_vfl_namespace(tmp_path: Path) -> None:
    """What `pip install .` (the Docker image) installs: every module under `vfl/`, with
    the demo's data and the dashboard's page."""
    pytest.importorskip("setuptools")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(tmp_path),
            str(REPO),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"vfl"}
    for needed in (
        "vfl/__init__.py",
        "vfl/proto/party_pb2.py",
        "vfl/proto/party.proto",
        "vfl/contract/spec/model.py",
        "vfl/cli/data/demo.yaml",
        "vfl/coordinator/ui/static/index.html",
    ):
        assert needed in names, f"{needed} is not in the wheel"
