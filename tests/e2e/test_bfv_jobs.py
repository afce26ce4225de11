"""`crypto: {scheme: bfv}` around the platform, with real daemons and real BFV (SEAL's
N = 8192 at 128-bit security; the Paillier keys of the job, which a bfv job still makes,
are INSECURE 1024-bit test keys): kill -9 of the passive party mid-job, PAUSED, `vfl
resume`, SUCCEEDED with the metrics of an uninterrupted run with the same keys; the wire
audit of both daemons before and after the crash; `vfl predict` and `vfl score` with the
trained bfv model; bad input refused at PREPARE, naming the field or column and the fix."""

from __future__ import annotations

import csv
import json

import pytest
import yaml
from vfl.contract.spec import TableSource, parse_spec_text
from vfl.party.state import StateDir
from vfl.party.transport.audit import read_audit

from tests.support.bfv_keys import checkpointed_bfv_secrets, pin_bfv_keys
from tests.support.blindfl_keys import checkpointed_keys, pin_keys
from tests.support.data import FATE, breast_datasets_config
from tests.support.harness import run_inprocess
from tests.support.processes import Daemons
from tests.support.wire_audit import assert_only_allowed_payloads

pytest.importorskip("tenseal")
pytestmark = pytest.mark.subprocess

CRYPTO = {"scheme": "bfv", "key_bits": 1024, "allow_insecure_test_keys": True}  # INSECURE
JOB = {
    "job": "crash-bfv",
    "protocol": "blindfl",
    "crypto": CRYPTO,
    "parties": [
        {"id": "bank", "role": "active", "data": {"dataset": "breast", "test_dataset": "breast"}},
        {"id": "shop", "role": "passive", "data": {"dataset": "breast", "test_dataset": "breast"}},
    ],
    "model": {"source": {"out_dim": 4}, "top": {"hidden": [8]}},
    "train": {"epochs": 3, "batch_size": 64, "checkpoint_every": 8},
    "validation": {"every": 8},
}
SPEC_TEXT = yaml.safe_dump(JOB)


def scaled_table(folder, factor: float) -> str:
    """The shop's table with its first feature column times `factor`."""
    with (FATE / "breast_hetero_host.csv").open() as fh:
        header, *rows = list(csv.reader(fh))
    path = folder / "scaled.csv"
    with path.open("w", newline="") as fh:
        scaled = [[r[0], f"{float(r[1]) * factor:.6f}", *r[2:]] for r in rows]
        csv.writer(fh).writerows([header, *scaled])
    return str(path)


@pytest.fixture(scope="module")
def federation(tmp_path_factory):
    """Daemons (audited) that ran the bfv job through a kill -9 of the shop and a resume:
    (daemons, job id, its final view)."""
    workdir = tmp_path_factory.mktemp("bfv")
    datasets = breast_datasets_config()
    datasets["shop"]["raw"] = {"path": scaled_table(workdir, 1000.0), "preprocess": "none"}
    audit = workdir / "audit"
    daemons = Daemons(workdir)
    daemons.start_coordinator()
    for party, sets in datasets.items():
        daemons.start_party(party, sets, audit)
    try:
        with daemons.client() as client:
            job_id = client.submit(SPEC_TEXT)
        view = daemons.kill_and_resume(job_id, "shop", datasets["shop"], audit)
        yield daemons, job_id, view
    finally:
        daemons.stop()


def test_a_killed_passive_party_resumes_a_bfv_job_with_its_keys(federation, monkeypatch) -> None:
    # Prepare: an uninterrupted run with every key the job's checkpoints hold
    daemons, job_id, view = federation
    spec = parse_spec_text(SPEC_TEXT)
    states = {p: StateDir(daemons.workdir / f"{p}-state") for p in ("bank", "shop")}
    pin_keys(monkeypatch, checkpointed_keys(states, job_id, spec))
    pin_bfv_keys(monkeypatch, checkpointed_bfv_secrets(states, job_id, spec))
    tables = {
        p: {n: TableSource(**d) for n, d in sets.items()}
        for p, sets in breast_datasets_config().items()
    }
    # Execute
    whole = run_inprocess(spec, tables)["bank"]
    # Assert: the resumed job's metrics are the uninterrupted run's (BFV is exact)
    assert whole["metrics"]["auc"] > 0.95
    for metric, value in whole["metrics"].items():
        assert abs(view.result.metrics[metric] - value) <= 1e-3, metric
    # Assert: one key exchange and layer setup; only allowed payloads, before and after
    records = [r for r in read_audit(daemons.workdir / "audit") if r["job"] == job_id]
    sent = [(r["sender"], r["tag"]) for r in records if r["direction"] == "sent"]
    for setup in [("bank", "src/pk"), ("shop", "src/pk"), ("shop", "src/u_b"), ("shop", "layout")]:
        assert sent.count(setup) == 1, setup
    assert ("shop", f"train/r{whole['rounds']}/m2") in sent  # after the restart, audited
    # (a BFV public key, an encryption of zero, crosses as a ciphertexts payload: no
    # Paillier key does without categorical columns)
    assert_only_allowed_payloads(records, {"bank", "shop"}, required=frozenset({"ciphertexts"}))
    bfv = [r for r in records if r["tag"].endswith(("/m1", "/m2", "/m3", "/vr", "/vc"))]
    assert bfv and all(r["kind"] == "ciphertexts" and r["size"] > 60_000 for r in bfv)


def test_vfl_predict_and_score_with_a_bfv_model(federation) -> None:
    # Execute
    daemons, model, trained = federation
    out = daemons.vfl("predict", model, "--data", "bank=breast", "--data", "shop=breast", "--json")
    # Assert: the trained model's metrics, scores at the active party only
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["state"] == "SUCCEEDED" and result["prediction"]["scored"] == 569
    for metric, value in trained.result.metrics.items():
        assert result["metrics"][metric] == pytest.approx(value, abs=1e-4), metric
    path = daemons.workdir / "bank-state" / "predictions" / f"{result['job']}.csv"
    with path.open() as fh:
        batch = {row["id"]: float(row["score"]) for row in csv.DictReader(fh)}
    records = [r for r in read_audit(daemons.workdir / "audit") if r["job"] == result["job"]]
    assert_only_allowed_payloads(records, {"bank", "shop"}, required=frozenset({"ciphertexts"}))
    assert "public_key" not in {r["kind"] for r in records}  # the stored keys are used
    # Execute: online scoring of two ids with the same model
    ids = ["133", "273"]
    out = daemons.vfl("score", model, "--id", ids[0], "--id", ids[1], "--json")
    # Assert: the batch prediction's scores
    assert out.returncode == 0, out.stderr
    online = {r["id"]: r for r in json.loads(out.stdout)["results"]}
    for i in ids:
        assert abs(online[i]["score"] - batch[i]) <= 1e-4, online[i]


@pytest.mark.parametrize(
    ("crypto", "dataset", "words"),
    [
        (
            {"bfv": {"coeff_bits": [60, 60, 60, 60]}},
            "breast",
            ["crypto.bfv.coeff_bits", "128-bit security", "use fewer or smaller primes"],
        ),
        (
            {"bfv": {"poly_degree": 4096}},
            "breast",
            ["crypto.bfv.coeff_bits", "above the 109 bits", "larger poly_degree"],
        ),
        ({}, "raw", ["column 'x0'", "beyond the +-64", "remove 'preprocess: none'"]),
    ],
)
def test_bad_bfv_input_is_refused_at_prepare_naming_the_field(
    federation, crypto, dataset, words
) -> None:
    # Prepare
    daemons = federation[0]
    job = {**JOB, "job": "bad-bfv", "crypto": {**CRYPTO, **crypto}}
    job["parties"] = [
        {"id": "bank", "role": "active", "data": {"dataset": "breast"}},
        {"id": "shop", "role": "passive", "data": {"dataset": dataset}},
    ]
    # Execute
    with daemons.client() as client:
        job_id = client.submit(yaml.safe_dump(job))
    view = daemons.wait(job_id, lambda v: v.state in ("SUCCEEDED", "FAILED"))
    # Assert: failed before any key crossed, the reason naming the field and the fix
    assert view.state == "FAILED"
    for word in words:
        assert word in view.reason, view.reason
    assert not [r for r in read_audit(daemons.workdir / "audit") if r["job"] == job_id]
    assert "scaled.csv" not in view.reason
