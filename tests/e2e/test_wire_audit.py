"""The wire audit: record every envelope of a real blindfl job and check what crossed.

Allowed in blindfl mode (docs/security.md): public keys, ciphertexts, the source layers'
setup messages (sizes, scales, slot layouts), row positions, PSI's control messages and
blinded curve points. Never a plaintext tensor, a feature value, a label or a weight.
"""

from __future__ import annotations

import csv
import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from party.transport.audit import read_audit
from tests.support.data import FATE

pytestmark = pytest.mark.subprocess


REPO = Path(__file__).resolve().parents[2]
ALLOWED = {"public_key", "ciphertexts", "layer_setup", "control", "indices", "ec_points"}


def columns(path: Path) -> tuple[list[str], list[list[str]]]:
    with path.open() as fh:
        rows = list(csv.reader(fh))
    return rows[0], rows[1:]


def forbidden_patterns() -> dict[str, list[bytes]]:
    """Byte encodings whose presence in any payload would be a leak."""
    patterns: dict[str, list[bytes]] = {"feature": [], "label": []}
    for name in ("breast_hetero_host.csv", "breast_hetero_guest.csv"):
        header, rows = columns(FATE / name)
        first = 2 if "y" in header else 1
        for row in rows:
            values = [float(v) for v in row[first:]]
            patterns["feature"] += [struct.pack("<d", v) for v in values if abs(v) > 1e-3]
            pairs = zip(values, values[1:], strict=False)
            patterns["feature"] += [struct.pack("<ff", a, b) for a, b in pairs]
    header, rows = columns(FATE / "breast_hetero_guest.csv")
    labels = np.array([float(r[1]) for r in rows])
    for start in range(0, len(labels) - 8, 8):
        run = labels[start : start + 8]
        patterns["label"] += [run.astype("<f4").tobytes(), run.astype("<f8").tobytes()]
    return patterns


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
            "coordinator.cli.main",
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
    kinds = {r["kind"] for r in records}
    assert {"public_key", "ciphertexts"} <= kinds, kinds
    assert kinds <= ALLOWED, f"disallowed payload kinds crossed the wire: {kinds - ALLOWED}"
    assert {r["sender"] for r in records} == {"bank", "shop"}
    blobs = {r["sha256"]: r["data"] for r in records}
    for what, patterns in forbidden_patterns().items():
        leaks = [p for p in patterns if any(p in blob for blob in blobs.values())]
        assert not leaks, f"{len(leaks)} {what} encodings found inside payloads"


def test_split_job_is_flagged_by_the_same_audit(tmp_path: Path) -> None:
    """The audit is not vacuous: plaintext split learning sends tensors."""
    records = run_audited(tmp_path, "job: audited-split\ntrain: {epochs: 1, batch_size: 64}\n")
    assert "tensor" in {r["kind"] for r in records}
