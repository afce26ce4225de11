"""bench/soak.py for 10 minutes (the hour's version is run by hand): training jobs back to
back, predictions, 200 online scoring clients, a party daemon killed with SIGKILL every
two minutes or so and resumed, and one over-limit job. No job may be lost (each ends
SUCCEEDED, or FAILED for the over-limit job), and no process of a killed daemon may be
alive 10 s after the kill."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.subprocess
def test_ten_minutes_of_soak_lose_no_job_and_leave_no_process(tmp_path: Path) -> None:
    # Execute
    out = tmp_path / "soak.json"
    args = ["--minutes", "10", "--kill-every", "120", "--json", str(out)]
    run = subprocess.run(
        [sys.executable, "-m", "bench.soak", *args],
        capture_output=True,
        text=True,
        timeout=40 * 60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=tmp_path,
    )
    # Assert
    assert out.exists(), run.stderr[-3000:]
    result = json.loads(out.read_text())
    assert "| jobs lost (must be 0) |" in run.stdout
    assert result["jobs_finished"] > 0 and result["kills"], run.stdout
    lost = [j for j in result["jobs"] if j["lost"]]
    assert result["jobs_lost"] == 0, lost
    assert result["leftover_processes"] == 0, result["kills"]
    assert run.returncode == 0, run.stdout
