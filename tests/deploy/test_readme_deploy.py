"""The deployment guide, run as a user would: in a fresh clone, after the README's install
command, every command of the first `sh` block under "Step by step" in deploy/README.md, in
order (extracted from the document, so the two cannot drift), through docker.

It needs root and a Docker engine that answers; elsewhere (CI) it skips at once, saying
which is missing. It takes minutes (install, image build, two compose runs): `slow`.
VFL_TRANSCRIPT=FILE keeps the commands with their output.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GUIDE = Path("deploy") / "README.md"
SECTION = "## Step by step"
LEFT_BEHIND = {".venv/", "deploy/wheels/", "deploy/.env", "vfl_platform.egg-info/"}


def deploy_commands(guide: str) -> str:
    """The first ```sh block of the deployment guide's step-by-step section."""
    assert SECTION in guide, f"no {SECTION!r} in {GUIDE}"
    section = guide.split(SECTION, 1)[1].split("\n## ", 1)[0]
    block = re.search(r"^```sh\n(.*?)^```", section, re.S | re.M)
    assert block is not None, f"no ```sh block under {SECTION!r}"
    return block.group(1)


def test_the_deployment_guide_shows_the_organisations_flow() -> None:
    commands = deploy_commands((REPO / GUIDE).read_text())
    for step in ("host_setup.sh", "certs init", "certs request", "certs sign", "prepare.sh"):
        assert step in commands, step
    for step in ("build_image.sh", "compose.yml up -d", "run --rm submit", "run_local.sh"):
        assert step in commands, step
    assert "certs issue" not in commands, "between organisations the CA makes no keys"
    assert re.search(r"^export VFL_DEPLOY=~/", commands, re.M), "keys outside the clone"


def docker_missing() -> str | None:
    """Why the section cannot run here, or None."""
    if os.geteuid() != 0:
        return (
            "needs root (deploy/host_setup.sh installs packages, the image build runs debootstrap)"
        )
    if shutil.which("docker") is None:
        return "no docker command; run deploy/host_setup.sh first"
    try:
        info = subprocess.run(["docker", "info"], capture_output=True, timeout=10)
    except subprocess.TimeoutExpired:
        return "`docker info` did not answer within 10 s"
    if info.returncode != 0:
        return "no Docker engine answers (`docker info` failed); run deploy/host_setup.sh first"
    return None


def run(command: list[str], cwd: Path, env: dict[str, str], timeout: float, log: Path):
    with log.open("a") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        return subprocess.run(
            command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=timeout
        )


def dangling_images() -> set[str]:
    out = subprocess.run(
        ["docker", "images", "--filter", "dangling=true", "--quiet", "--no-trunc"],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(out.stdout.split())


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.timeout(5400)  # about 8 minutes on 2 shared cores with a warm image cache
def test_the_deployment_guide_runs_in_a_fresh_clone(tmp_path: Path) -> None:
    missing = docker_missing()
    if missing:
        pytest.skip(missing)
    # Prepare: a fresh clone and a home of its own (~/vfl-deploy lands in the test's folder)
    clone, home = tmp_path / "clone", tmp_path / "home"
    home.mkdir()
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("VFL", "VFL_DEPLOY", "PYTHONPATH")}
    env.update(HOME=str(home), PS4="$ ")
    script = tmp_path / "readme_deploy.sh"
    script.write_text("set -euo pipefail -x\n" + deploy_commands((clone / GUIDE).read_text()))
    transcript = tmp_path / "transcript.txt"
    images = dangling_images()
    try:
        # Execute: the README's install command, then the guide's steps
        installed = run(["scripts/install.sh"], clone, env, 1800, transcript)
        assert installed.returncode == 0, transcript.read_text()[-3000:]
        deployed = run(["bash", str(script)], clone, env, 3600, transcript)
        # Assert: every command worked, the job succeeded twice, nothing secret in the clone
        log = transcript.read_text()
        assert deployed.returncode == 0, log[-5000:]
        assert log.count(": SUCCEEDED, r2 0.9") >= 2, log[-5000:]
        status = subprocess.run(
            ["git", "status", "--porcelain", "--ignored"],
            cwd=clone,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        changed = [ln for ln in status if not ln.startswith("!! ")]
        ignored = {ln[3:] for ln in status if ln.startswith("!! ") and "__pycache__" not in ln}
        assert changed == [] and ignored <= LEFT_BEHIND, status
        secrets = [p for p in clone.rglob("*") if p.suffix in (".key", ".crt", ".csr")]
        assert [p for p in secrets if ".venv" not in p.parts] == []
        assert (home / "vfl-deploy" / "plant" / "tls" / "plant.key").is_file()
        assert dangling_images() <= images, "a rebuild left an untagged image"
    finally:
        compose = ["docker-compose", "-f", "deploy/compose.yml", "down", "--remove-orphans"]
        subprocess.run(compose, cwd=clone, env=env, capture_output=True, timeout=300)
        if os.environ.get("VFL_TRANSCRIPT"):  # keep what ran, with its output
            shutil.copyfile(transcript, os.environ["VFL_TRANSCRIPT"])
