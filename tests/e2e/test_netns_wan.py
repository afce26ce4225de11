"""The kernel-shaped WAN topology of deploy/wan/netns.sh (network namespaces + tc tbf).

Skipped, with the reason, where the machine cannot create namespaces (not root, no
iproute2). Delay comes from netem when the kernel has it, else from the in-process shaper.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.data import FATE

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "deploy" / "wan" / "netns.sh"
ENV = {**os.environ, "PYTHON": sys.executable}


def _can_make_namespaces() -> str | None:
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "iproute2 (ip, tc) is not installed"
    probe = subprocess.run(["ip", "netns", "add", "vfl-probe"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"cannot create a network namespace here: {probe.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", "vfl-probe"], capture_output=True)
    return None


REASON = _can_make_namespaces()
pytestmark = [pytest.mark.subprocess, pytest.mark.skipif(REASON is not None, reason=REASON or "")]


@pytest.fixture
def wan():
    subprocess.run([str(SCRIPT), "down"], capture_output=True)
    up = subprocess.run([str(SCRIPT), "up", "50", "40"], capture_output=True, text=True)
    assert up.returncode == 0, up.stderr
    yield
    subprocess.run([str(SCRIPT), "down"], capture_output=True)


def test_kernel_shaping_delivers_the_configured_bandwidth(wan) -> None:
    out = subprocess.run(
        [str(SCRIPT), "measure", "10"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=ENV,
    )
    measured = json.loads(out.stdout.strip().splitlines()[-1])
    assert 0.8 * 50 <= measured["mbit_per_s"] <= 1.05 * 50, measured


def test_a_job_runs_across_the_namespaces(wan, tmp_path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(f"""
job: netns
parties:
  - {{id: bank, role: active, data: {{path: {FATE}/breast_hetero_guest.csv, label: y}}}}
  - {{id: shop, role: passive, data: {{path: {FATE}/breast_hetero_host.csv}}}}
train: {{epochs: 2, batch_size: 64}}
""")
    out = subprocess.run(
        [str(SCRIPT), "run", str(job)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env=ENV,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["state"] == "SUCCEEDED", result
    # every round pays at least one RTT (40 ms) on top of compute
    assert result["seconds"] >= result["rounds"] * 0.040
