"""`vfl attack` end to end on the bundled breast data (a smoke test: breast is too small
for the must-show numbers, which bench/attacks.py measures on 25k+ rows)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import vfl
from tests.support.data import FATE

pytestmark = pytest.mark.subprocess

FIELDS = {
    "attack",
    "attacker",
    "used",
    "score",
    "baseline",
    "chance_low",
    "chance_high",
    "verdict",
    "scored",
}


def _job(tmp_path: Path, protocol: str, extra: str = "") -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(f"""
job: breast-{protocol}
parties:
  - {{id: bank, role: active, data: {{path: {FATE}/breast_hetero_guest.csv, label: y}}}}
  - {{id: shop, role: passive, data: {{path: {FATE}/breast_hetero_host.csv}}}}
protocol: {protocol}
model: {{source: {{out_dim: 4}}, top: {{hidden: [8]}}}}
train: {{epochs: 3, batch_size: 64}}
validation: {{every: 1000}}
{extra}""")
    return path


@pytest.mark.parametrize("scheme", ["paillier", pytest.param("bfv", marks=pytest.mark.slow)])
def test_blindfl_smoke_attacks_stay_at_chance_and_the_report_says_so(
    tmp_path: Path, scheme: str
) -> None:
    keys = f"crypto: {{scheme: {scheme}, key_bits: 512, allow_insecure_test_keys: true}}\n"
    job, report = _job(tmp_path, "blindfl", keys), tmp_path / "r"
    out = vfl("attack", str(job), "--json", "--out", str(report), "--no-distinguisher")
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout)
    assert (result["job"], result["protocol"], result["state"]) == (
        "breast-blindfl",
        "blindfl",
        "SUCCEEDED",
    )
    assert result["metrics"]["auc"] > 0.9
    rows = result["attacks"]
    assert all(set(r) == FIELDS for r in rows)
    assert {r["attack"] for r in rows} == {
        "norm",
        "direction",
        "model_completion",
        "feature_inference",
    }
    label = [r for r in rows if r["attack"] in ("norm", "direction")]
    decrypted = {"decrypted m1 (S)"} if scheme == "bfv" else set()  # BFV makes no m1 at setup
    assert {r["used"].split(",")[0] for r in label} >= {"received m3", *decrypted}
    assert all(r["attacker"] == "shop (passive)" and r["verdict"] == "at chance" for r in label)
    features = [r for r in rows if r["attack"] == "feature_inference"]
    assert features and all(r["attacker"] == "bank (active)" for r in features)
    assert all(r["chance_low"] < r["chance_high"] for r in rows)
    text = (report / "report.md").read_text()
    assert "| norm | shop (passive)" in text and list(report.glob("*.png"))
    assert json.loads((report / "attacks.json").read_text()) == result


@pytest.mark.slow
def test_split_leaks_every_way_the_table_shows(tmp_path: Path) -> None:
    out = vfl("attack", str(_job(tmp_path, "split")))
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    head = "job breast-split (split): SUCCEEDED, validation "
    assert lines[0].startswith(head) and "auc" in lines[0]
    assert lines[1].split()[:3] == ["attack", "attacker", "score"]
    verdicts = {line.split()[0]: line for line in lines[2:]}
    for attack in ("direction", "distinguisher", "feature_inference"):  # breast: 63% positive,
        assert "  leaks  " in verdicts[attack], out.stdout  # so the norm score need not rank
    assert "seconds: job" in out.stderr


@pytest.mark.slow  # 46 s; tests/attack/test_trees.py runs the same attacks on real views in-process
def test_secureboost_job_prints_the_tree_attacks_with_their_bands(tmp_path: Path) -> None:
    """Issue 37's must-show: `vfl attack` on a secureboost job (test keys)."""
    job = tmp_path / "trees.yaml"
    job.write_text(f"""
job: breast-trees
parties:
  - {{id: bank, role: active, data: {{path: {FATE}/breast_hetero_guest.csv, label: y}}}}
  - {{id: shop, role: passive, data: {{path: {FATE}/breast_hetero_host.csv}}}}
protocol: secureboost
crypto: {{key_bits: 768, allow_insecure_test_keys: true}}
model: {{trees: {{count: 4, depth: 3, bins: 16}}}}
validation: {{fraction: 0.2}}
""")
    out = vfl("attack", str(job))
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert lines[0].startswith("job breast-trees (secureboost): SUCCEEDED, validation ")
    assert "permuted-label job 0.0" in out.stderr  # tree jobs run once
    rows = {line.split()[0] for line in lines[2:]}
    assert rows == {"gradient_sign", "instance_space", "first_tree", "feature_order"}
    sign = next(line for line in lines if line.startswith("gradient_sign"))
    assert "at chance" in sign and "ciphertexts" in sign
    assert "chance band" in lines[1]
    assert all(" leaks " in line or " at chance " in line for line in lines[2:])
