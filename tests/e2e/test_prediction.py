"""Batch prediction through real daemons: train a blindfl model, then `vfl predict` it as a
user would; the wire audit of the prediction job; bad input as named errors with every
daemon still serving."""

from __future__ import annotations

import csv
import json

import pytest
import yaml
from vfl.party.transport.audit import read_audit

from tests.support.data import FATE, breast_datasets_config
from tests.support.processes import Daemons
from tests.support.wire_audit import assert_only_allowed_payloads

pytestmark = pytest.mark.subprocess

JOB = {
    "job": "scored",
    "protocol": "blindfl",
    "crypto": {"key_bits": 512, "allow_insecure_test_keys": True},  # INSECURE test keys
    "parties": [
        {"id": "bank", "role": "active", "data": {"dataset": "breast", "test_dataset": "breast"}},
        {"id": "shop", "role": "passive", "data": {"dataset": "breast", "test_dataset": "breast"}},
    ],
    "model": {"source": {"out_dim": 4}, "top": {"hidden": [8]}},
    "train": {"epochs": 1, "batch_size": 128},
}


def renamed_column(folder) -> str:
    """The shop's table with its first feature column under another name."""
    with (FATE / "breast_hetero_host.csv").open() as fh:
        header, *rows = list(csv.reader(fh))
    path = folder / "renamed.csv"
    with path.open("w", newline="") as fh:
        csv.writer(fh).writerows([[header[0], "x0_new", *header[2:]], *rows])
    return str(path)


@pytest.fixture(scope="module")
def federation(tmp_path_factory):
    """Daemons with a trained blindfl model (audited), and that model's id."""
    workdir = tmp_path_factory.mktemp("federation")
    daemons = Daemons(workdir)
    daemons.start_coordinator()
    datasets = breast_datasets_config()
    datasets["shop"]["renamed"] = {"path": renamed_column(workdir)}
    for party, sets in datasets.items():
        daemons.start_party(party, sets, audit=workdir / "audit")
    try:
        with daemons.client() as client:
            job_id = client.submit(yaml.safe_dump(JOB))
        view = daemons.wait(job_id, lambda v: v.state in ("SUCCEEDED", "FAILED"))
        assert view.state == "SUCCEEDED", view.reason
        yield daemons, job_id, view
    finally:
        daemons.stop()


def predict(daemons: Daemons, *args: str):
    out = daemons.vfl("predict", *args, "--json")
    return out, (json.loads(out.stdout) if out.stdout.strip() else None)


def test_vfl_predict_scores_at_the_active_party_only_with_the_jobs_metrics(federation):
    daemons, model, trained = federation
    out, result = predict(daemons, model, "--data", "bank=breast", "--data", "shop=breast")
    assert out.returncode == 0, out.stderr
    assert result["state"] == "SUCCEEDED"
    assert result["prediction"] == {
        "model": model,
        "rows": 569,
        "scored": 569,
        "missing": 0,
        "output": f"{result['job']}.csv",
    }
    for metric, value in trained.result.metrics.items():
        assert result["metrics"][metric] == pytest.approx(value, abs=1e-4), metric
    scores = daemons.workdir / "bank-state" / "predictions" / f"{result['job']}.csv"
    with scores.open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 569 and set(rows[0]) == {"id", "score", "class"}
    assert not list(daemons.workdir.glob("shop-state/predictions/*"))
    # the wire audit of the prediction job: allowed kinds only, no feature or label
    records = [r for r in read_audit(daemons.workdir / "audit") if r["job"] == result["job"]]
    assert records
    assert_only_allowed_payloads(records, {"bank", "shop"}, required=frozenset({"ciphertexts"}))
    assert "public_key" not in {r["kind"] for r in records}  # the stored keys are used


def test_bad_predictions_are_named_errors_and_no_daemon_dies(federation):
    daemons, model, _ = federation
    # an unknown model
    out, _ = predict(daemons, "j-nosuchmodel", "--data", "bank=breast", "--data", "shop=breast")
    assert out.returncode == 2 and "j-nosuchmodel" in out.stderr
    # a party left out, and one the model does not know
    out, _ = predict(daemons, model, "--data", "bank=breast", "--data", "mall=breast")
    assert out.returncode == 2
    assert "missing: ['shop']" in out.stderr and "not in the model: ['mall']" in out.stderr
    # a malformed --data
    out, _ = predict(daemons, model, "--data", "bank")
    assert out.returncode == 2 and "PARTY=DATASET" in out.stderr
    # a column the model lacks: the job fails at PrepareJob (exit code 2: the input is
    # wrong), naming party and dataset only
    out, result = predict(daemons, model, "--data", "bank=breast", "--data", "shop=renamed")
    assert out.returncode == 2 and result["state"] == "FAILED"
    assert "party 'shop'" in result["reason"] and "does not fit model" in result["reason"]
    assert "renamed.csv" not in result["reason"] and "x0" not in result["reason"]
    assert not [r for r in read_audit(daemons.workdir / "audit") if r["job"] == result["job"]]
    # the same output name twice: refused before scoring
    first, _ = predict(daemons, model, "--data", "bank=breast", "--data", "shop=breast")
    assert first.returncode == 0
    again_args = ("--data", "bank=breast", "--data", "shop=breast", "--out", "twice")
    assert predict(daemons, model, *again_args)[0].returncode == 0
    out, result = predict(daemons, model, *again_args)
    assert result["state"] == "FAILED" and "already holds scores named 'twice.csv'" in out.stdout
    # a training job that is not a model, and a prediction job as a model
    out, _ = predict(daemons, result["job"], "--data", "bank=breast", "--data", "shop=breast")
    assert out.returncode == 2 and "left no model" in out.stderr
    # every daemon still answers
    for name in ("coordinator", "bank", "shop"):
        assert daemons.procs[name].poll() is None, name
