"""bench/secure_epoch.py --cases ctr runs end to end with tiny settings (daemons as
processes through `vfl run`, 512-bit INSECURE test keys, 256 rows: one training step):
split and blindfl train, and blindfl's seconds per step is printed next to the
Embed-MatMul layer's floor, whose counts are those of `EmbedCounter` for the run's shape."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # over 30 s; guards the benchmark script, no fault of its own
@pytest.mark.subprocess
def test_secure_epoch_ctr_smoke(tmp_path: Path) -> None:
    out = tmp_path / "ctr.json"
    args = ["--cases", "ctr", "--ctr-rows", "256", "--key-bits", "512", "--modes", "shared"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run(
        [sys.executable, "-m", "bench.secure_epoch", *args, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    row = re.search(
        r"^\| blindfl \| shared \| ([\d.]+) \| ([\d.]+) \| ([\d.]+)x \|", run.stdout, re.M
    )
    assert row is not None, run.stdout
    step, floor, ratio = (float(v) for v in row.groups())
    assert 0 < floor and ratio == pytest.approx(step / floor, abs=0.02)
    assert re.search(r"^\| split \| shared \| [\d.]+ \| - \| - \|", run.stdout, re.M)
    # 230 training rows: one step; 26 validation rows; 512 bits: 8 E slots (one field of
    # 8 per plaintext, 26 plaintexts), 4 h slots (4 plaintexts of 16), 4 D slots (52)
    floor_counts = json.loads(out.read_text())["cases"]["ctr"]["floor"]
    assert floor_counts["steps"] == 1
    assert floor_counts["layouts"]["e_cols"] == 26 and floor_counts["layouts"]["d_cols"] == 52
    epoch = floor_counts["epoch"]
    n, e_cols, h_cols, d_cols, width = 230, 26, 4, 52, 208
    assert epoch["decryptions"] == n * (e_cols + 2 * h_cols + d_cols) + width * h_cols
    assert epoch["fresh"] == n * h_cols + width * h_cols + n * 26 + width * h_cols + 16 * d_cols
