"""The wire audit: record every envelope of a real blindfl job and check what crossed
(the checks: `tests.support.wire_audit`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from vfl.party.transport.audit import read_audit

from tests.support.data import FATE
from tests.support.wire_audit import assert_only_allowed_payloads

pytestmark = pytest.mark.subprocess


REPO = Path(__file__).resolve().parents[2]


BREAST_PARTIES = f"""
parties:
  - {{id: bank, role: active, data: {{path: {FATE}/breast_hetero_guest.csv, label: y}}}}
  - {{id: shop, role: passive, data: {{path: {FATE}/breast_hetero_host.csv}}}}
"""


def run_audited(tmp_path: Path, spec: str) -> list[dict]:
    """`vfl run --audit` a breast job; returns the audit records."""
    job, audit = tmp_path / "job.yaml", tmp_path / "audit"
    job.write_text(BREAST_PARTIES + spec)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "vfl.cli.main",
            "run",
            str(job),
            "--json",
            "--audit",
            str(audit),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout)["state"] == "SUCCEEDED"
    return read_audit(audit)


def test_blindfl_job_sends_only_allowed_payloads(tmp_path: Path) -> None:
    records = run_audited(
        tmp_path,
        """
job: audited
protocol: blindfl
crypto: {key_bits: 512, allow_insecure_test_keys: true}
model: {source: {out_dim: 4}, top: {hidden: [8]}}
train: {epochs: 2, batch_size: 64}
validation: {every: 4}
""",
    )
    assert_only_allowed_payloads(records, {"bank", "shop"})


def test_split_job_is_flagged_by_the_same_audit(tmp_path: Path) -> None:
    """The audit is not vacuous: plaintext split learning sends tensors."""
    records = run_audited(tmp_path, "job: audited-split\ntrain: {epochs: 1, batch_size: 64}\n")
    assert "tensor" in {r["kind"] for r in records}
