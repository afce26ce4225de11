"""bench/predict.py runs end to end with tiny settings (daemons as processes, 512-bit
INSECURE test keys, 200 rows): both protocols train and score, the floor is counted, and
online scoring answers; with --sql, also with the shop's rows in PostgreSQL."""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # 20-30 s; guards the benchmark script, no fault of its own
@pytest.mark.subprocess
def test_predict_bench_smoke(tmp_path: Path) -> None:
    out = tmp_path / "predict.json"
    args = ["--rows", "200", "--key-bits", "512", "--batch", "64", "--out", str(out)]
    args += ["--online-requests", "20", "--online-seconds", "1"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run(
        [sys.executable, "-m", "bench.predict", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "| blindfl | 200 |" in run.stdout and "one id per request" in run.stdout
    result = json.loads(out.read_text())
    assert {r["scored"] for r in result["results"].values()} == {200}
    counts = result["counts"]  # 512 bits: 11 slots, out_dim 16 -> 2 columns, 1 row each
    assert counts["notes"] == {"slots": 11, "rows_per_cipher": 1}
    assert counts["ciphertexts"] == counts["decryptions"] == counts["obfuscators"] == 2 * 2 * 200
    assert 0 < result["floor_seconds"] < result["results"]["blindfl"]["seconds"]
    online = result["online"]
    assert online["requests"] == 20 and 0 < online["p50_ms"] <= online["p99_ms"]
    assert online["per_second_8_clients"] > 0


@pytest.mark.slow  # 26-34 s; guards the benchmark script (SQL serving: test_sql_serving.py)
@pytest.mark.subprocess
def test_predict_bench_sql_smoke(tmp_path: Path) -> None:
    if importlib.util.find_spec("psycopg") is None or not glob.glob("/usr/lib/postgresql/*"):
        pytest.skip("--sql needs psycopg and Debian's postgresql")
    out = tmp_path / "predict.json"
    args = ["--rows", "200", "--key-bits", "512", "--out", str(out), "--sql", "--no-batch"]
    args += ["--online-requests", "20", "--online-seconds", "1"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run(
        [sys.executable, "-m", "bench.predict", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "| blindfl, the shop's rows in PostgreSQL (looked up by id) |" in run.stdout
    result = json.loads(out.read_text())
    online = result["online_sql"]
    assert online["requests"] == 20 and 0 < online["p50_ms"] <= online["p95_ms"]
    assert online["scans"] > 20  # a lookup per micro-batch
    assert result["results"] == {} and result["online"]["requests"] == 20
