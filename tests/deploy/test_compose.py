"""deploy/: compose.yml and the Dockerfile agree with the real CLI parser and the party
configs, the same topology runs end to end as local processes (deploy/run_local.sh), and
no script leaves anything in the working tree.

The deployment guide (deploy/README.md) through docker is tests/deploy/test_readme_deploy.py.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest
import yaml
from vfl.cli import daemons, jobs, main as cli
from vfl.contract.spec import parse_spec_text
from vfl.party.config import PartyConfig, load_party_config

pytestmark = pytest.mark.subprocess

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
ORGS = Path("/$VFL_DEPLOY")  # stands for the organisations' folders, outside the clone
VFL_DEPLOY = re.compile(r"^\$\{VFL_DEPLOY:\?[^}]+\}")
DAEMONS = {"coordinator": daemons.cmd_coordinator_serve}


@pytest.fixture(scope="module")
def services() -> dict[str, dict]:
    return yaml.safe_load((DEPLOY / "compose.yml").read_text())["services"]


def parse(command: list[str]) -> argparse.Namespace:
    assert command[0] == "vfl", command
    return cli.build_parser().parse_args(command[1:])


def mounts(service: dict) -> dict[PurePosixPath, tuple[Path, bool]]:
    """Container path -> (host path, read-only) of a service's bind mounts."""
    out = {}
    for volume in service.get("volumes", []):
        volume = VFL_DEPLOY.sub(str(ORGS), volume)
        source, target, *mode = volume.split(":")
        if source.startswith(str(ORGS)):
            host = Path(source)
        else:
            assert source.startswith("./"), f"{volume}: relative to deploy/ or in $VFL_DEPLOY"
            host = (DEPLOY / source).resolve()
        out[PurePosixPath(target)] = (host, mode == ["ro"])
    return out


def host_path(service: dict, path: str | PurePosixPath) -> Path:
    """The host path behind a container path (through the longest matching mount)."""
    path = PurePosixPath(path)
    matches = [t for t in mounts(service) if path == t or t in path.parents]
    assert matches, f"{path} is not on any volume of the service"
    target = max(matches, key=lambda t: len(t.parts))
    return mounts(service)[target][0].joinpath(*path.relative_to(target).parts)


def port(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def parties(services: dict) -> dict[str, dict]:
    return {n: s for n, s in services.items() if parse(s["command"]).fn is daemons.cmd_party_serve}


def party_config(service: dict) -> PartyConfig:
    return load_party_config(host_path(service, parse(service["command"]).config))


def test_every_service_runs_the_local_image_as_a_non_root_user(services) -> None:
    for name, service in services.items():
        assert service["image"] == "vfl:local", name
        uid = re.sub(r"\$\{\w+:-(\d+)\}", r"\1", service["user"]).split(":")[0]
        assert uid.isdigit() and int(uid) != 0, f"{name} runs as {service['user']}"


def test_party_services_serve_their_configs_with_their_own_data(services) -> None:
    coordinator = parse(services["coordinator"]["command"])
    for name, service in parties(services).items():
        args = parse(service["command"])
        config = party_config(service)
        assert config.party_id == name
        assert args.advertise == f"{name}:{port(args.listen)}"
        assert args.coordinator == f"coordinator:{port(coordinator.listen)}"
        container_dir = PurePosixPath(args.config).parent
        for dataset in config.datasets.values():
            relative = Path(dataset.path).relative_to(host_path(service, args.config).parent)
            in_container = container_dir / PurePosixPath(*relative.parts)
            assert host_path(service, in_container) == Path(dataset.path), dataset.name
            assert Path(dataset.path).is_file() and f"/data/{name}/" in dataset.path
        data = [h for h, _ in mounts(service).values() if "data" in h.parts]
        assert data == [DEPLOY / "parties" / "data" / name], "one data volume per party"


def test_each_process_reads_its_own_organisation_folder_outside_the_clone(services) -> None:
    identities = re.search(r'^IDENTITIES="([^"]+)"', (DEPLOY / "prepare.sh").read_text(), re.M)
    listed = re.search(r'^PARTIES="([^"]+)"', (DEPLOY / "prepare.sh").read_text(), re.M)
    assert identities is not None and listed is not None
    expected = {"coordinator", "admin", *parties(services)}
    assert set(identities.group(1).replace("$PARTIES", listed.group(1)).split()) == expected
    for name, service in services.items():
        args = parse(service["command"])
        identity = getattr(args, "identity", None) or name
        assert host_path(service, args.tls) == ORGS / identity / "tls", name
        assert mounts(service)[PurePosixPath(args.tls)][1], f"{name}: mount certs read-only"
        for host, read_only in mounts(service).values():
            assert host.is_relative_to(ORGS) or read_only, f"{name} writes {host} in the clone"
            assert not host.is_relative_to(ORGS) or host.parts[2] == identity, name


def test_health_checks_call_the_grpc_health_service_of_their_own_daemon(services) -> None:
    for name, service in services.items():
        args = parse(service["command"])
        if args.fn is jobs.cmd_submit:
            continue
        test = service["healthcheck"]["test"]
        check = parse(test[1:])
        assert test[0] == "CMD" and check.fn is jobs.cmd_health
        assert port(check.address) == port(args.listen)
        assert (check.tls, check.identity) == (args.tls, name)


def test_coordinator_keeps_its_store_on_a_writable_volume_and_publishes_its_port(
    services,
) -> None:

    service = services["coordinator"]
    args = parse(service["command"])
    assert args.fn is daemons.cmd_coordinator_serve
    db_volume = mounts(service)[PurePosixPath(args.db).parent]
    assert db_volume == (ORGS / "coordinator" / "db", False)
    assert service["ports"] == [f"127.0.0.1:{port(args.listen)}:{port(args.listen)}"]


def test_submit_runs_the_demo_job_on_the_healthy_parties(services) -> None:
    service = services["submit"]
    args = parse(service["command"])
    assert args.fn is jobs.cmd_submit and args.wait and args.identity == "admin"
    coordinator = parse(services["coordinator"]["command"])
    assert args.coordinator == f"coordinator:{port(coordinator.listen)}"
    spec = parse_spec_text(host_path(service, args.spec).read_text())
    assert {p.id for p in spec.parties} == set(parties(services))
    for p in spec.parties:
        assert p.data.dataset in party_config(services[p.id]).datasets
    assert service["profiles"] == ["submit"] and service["restart"] == "no"
    assert service["depends_on"] == {
        n: {"condition": "service_healthy"} for n in ["coordinator", *parties(services)]
    }


def test_dockerfile_builds_offline_from_a_local_base_as_non_root(services) -> None:
    lines = [ln.strip() for ln in (DEPLOY / "Dockerfile").read_text().splitlines()]
    code = [ln for ln in lines if ln and not ln.startswith("#")]
    assert [ln for ln in code if ln.startswith("FROM")] == ["FROM ${BASE}"]
    assert "ARG BASE=vfl-base:bookworm" in code
    installs = [ln for ln in code if "pip install" in ln]
    assert installs and all("--no-index" in ln for ln in installs)
    assert installs[0].endswith("torch==2.13.0 \\") and "vfl-platform" in installs[-1]
    user = next(ln.split()[1] for ln in code if ln.startswith("USER"))
    assert user.split(":")[0].isdigit() and int(user.split(":")[0]) != 0
    exposed = {int(p) for ln in code if ln.startswith("EXPOSE") for p in ln.split()[1:]}
    assert {port(parse(s["command"]).listen) for s in services.values() if "healthcheck" in s} <= (
        exposed
    )
    assert "!wheels/" in (DEPLOY / ".dockerignore").read_text().split()


def test_run_local_serves_the_same_configs_and_job(services) -> None:
    script = (DEPLOY / "run_local.sh").read_text()
    listed = re.search(r'^PARTIES="([^"]+)"', script, re.M)
    assert listed is not None and listed.group(1).split() == list(parties(services))
    assert '--config "$here/parties/$p.yaml"' in script
    assert '"$here/job.yaml"' in script and "prepare.sh" in script


def test_run_local_runs_the_deploy_topology_and_leaves_nothing_behind(tmp_path) -> None:
    # Prepare: from the repository root, without a folder argument, as a user would
    env = {
        **os.environ,
        "VFL": f"{sys.executable} -m vfl.cli.main",
        "PYTHONPATH": str(REPO),
        "TMPDIR": str(tmp_path),
    }
    before = git_status()
    # Execute (within the subprocess timeout: a hang fails it)
    out = subprocess.run(
        ["bash", "deploy/run_local.sh"],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=REPO,
    )
    # Assert
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.splitlines()[-1])
    assert result["state"] == "SUCCEEDED" and result["metrics"]["r2"] >= 0.8
    assert result["intersection_size"] == 800 and set(result["parties"]) == {
        "plant",
        "cooling",
        "drive",
    }
    assert not list(tmp_path.glob("vfl-*")), "its temporary folder is removed"
    assert git_status() == before, "nothing written into the working tree"


def test_prepare_refuses_a_folder_inside_the_clone() -> None:
    env = {**os.environ, "VFL": f"{sys.executable} -m vfl.cli.main"}
    out = subprocess.run(
        ["bash", "deploy/prepare.sh", "deploy/run"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=REPO,
    )
    assert out.returncode == 2 and "inside the clone; keep keys outside it" in out.stderr
    assert not (DEPLOY / "run").exists()


def git_status() -> str:
    out = subprocess.run(
        ["git", "status", "--porcelain", "--ignored", "--untracked-files=all"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
    )
    return "\n".join(ln for ln in out.stdout.splitlines() if "__pycache__" not in ln)
