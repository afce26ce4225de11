"""The issue's must-show numbers, frozen: bench/attacks.py's `vfl attack` runs on 28,000
a9a rows (22% positive) and synthetic credit rows (3% positive: 30,000 for split, 10,000
for blindfl). Slow (split a minute each; blindfl at 1024-bit test keys several minutes;
one run at 2048)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NORM_FLOOR = {"a9a22": 0.70, "credit3": 0.85}  # split's norm AUC, by positive rate
# split's model-completion gain over the raw-feature head, where the passive bottom can
# learn what its raw columns do not show a 40-label head: a9a22's 74 columns, or a bottom
# with a hidden layer. A linear bottom over credit3's 10 dense columns is one linear map
# of them, which 40 labels already fit about as well (bench/results/attacks.txt): no gain
# is asserted there.
COMPLETION_GAIN = {"a9a22:split": 0.05, "credit3:split:hidden32": 0.05}


def _run(case: str, tmp_path: Path) -> dict:
    out = tmp_path / "attacks.json"
    run = subprocess.run(
        [sys.executable, "-m", "bench.attacks", "--only", case, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=3600,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    print(run.stdout)  # the bench's table (pytest -s shows it)
    return json.loads(out.read_text())[case]


def _one(rows: list[dict], attack: str, used: str = "") -> dict:
    found = [r for r in rows if r["attack"] == attack and r["used"].startswith(used)]
    assert found, (attack, used)
    return found[0]


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.parametrize("case", ["a9a22:split", "credit3:split", "credit3:split:hidden32"])
def test_split_leaks_as_the_papers_say(case: str, tmp_path: Path) -> None:
    rows = _run(case, tmp_path)["attacks"]
    assert all(r["scored"] >= 5000 for r in rows if r["attack"] != "feature_inference")
    assert _one(rows, "direction")["score"] >= 0.95
    assert _one(rows, "norm")["score"] >= NORM_FLOOR[case.split(":")[0]]
    if case in COMPLETION_GAIN:
        completion = _one(rows, "model_completion")
        assert completion["score"] - completion["baseline"] >= COMPLETION_GAIN[case]
    assert _one(rows, "distinguisher")["verdict"] == "leaks"


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.parametrize(
    "case", ["a9a22:blindfl", "credit3:blindfl", "credit3:blindfl:2048", "credit3:blindfl:bfv"]
)
def test_blindfl_leaves_the_attacks_at_chance(case: str, tmp_path: Path) -> None:
    rows = _run(case, tmp_path)["attacks"]
    label = [r for r in rows if r["attack"] in ("norm", "direction", "distinguisher")]
    assert {r["attack"] for r in label} == {"norm", "direction", "distinguisher"}
    for r in label:
        assert r["scored"] >= 5000
        assert r["chance_low"] <= r["score"] <= r["chance_high"], r
    completion = _one(rows, "model_completion")
    assert completion["score"] - completion["baseline"] <= 0.02
