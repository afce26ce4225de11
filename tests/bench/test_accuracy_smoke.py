"""bench/accuracy.py runs end to end with tiny settings (real `vfl run` jobs, 512-bit
INSECURE test keys, breast, one epoch): one row per job seed, then the summary over them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # over 30 s; guards the benchmark script, no fault of its own
@pytest.mark.subprocess
def test_accuracy_bench_sweeps_job_seeds_and_summarises(tmp_path: Path) -> None:
    out = tmp_path / "accuracy.json"
    args = ["--only", "breast", "--job-seeds", "1", "2", "--epochs", "1", "--key-bits", "512"]
    run = subprocess.run(
        [sys.executable, "-m", "bench.accuracy", *args, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    runs = json.loads(out.read_text())["results"]["breast"]
    assert [r["job_seed"] for r in runs] == [1, 2]
    for r in runs:
        assert 0.9 < r["split"][0] <= 1 and 0.9 < r["blindfl"][0] <= 1
    lines = run.stdout.splitlines()
    rows = [line.split() for line in lines if line.startswith("breast")]
    assert [row[2] for row in rows[:2]] == ["1", "2"]
    mean_split = (runs[0]["split"][0] + runs[1]["split"][0]) / 2
    assert rows[2][1] == "mean" and float(rows[2][2]) == pytest.approx(mean_split, abs=1e-4)
    assert "2 runs" in lines[-1]
