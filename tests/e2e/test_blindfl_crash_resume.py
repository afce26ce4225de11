"""Crash-safe blindfl jobs with real processes: kill -9 the passive party's daemon in the
middle of a blindfl job, start it again and resume. The job ends SUCCEEDED with the
metrics of an uninterrupted run with the same key pairs (read from the job's own
checkpoints, run in-process), the parties exchange keys and set up their layers only
once, and the wire audit of both daemons, before and after the crash, shows only allowed
payloads."""

from __future__ import annotations

import pytest
import yaml
from vfl.contract.spec import TableSource, parse_spec_text
from vfl.party.state import StateDir
from vfl.party.transport.audit import read_audit

from tests.support.blindfl_keys import checkpointed_keys, pin_keys
from tests.support.data import breast_datasets_config
from tests.support.harness import run_inprocess
from tests.support.processes import Daemons
from tests.support.wire_audit import assert_only_allowed_payloads

pytestmark = pytest.mark.subprocess

JOB = {
    "job": "crash-blind",
    "protocol": "blindfl",
    "crypto": {"key_bits": 512, "allow_insecure_test_keys": True},  # INSECURE test keys
    "parties": [
        {"id": "bank", "role": "active", "data": {"dataset": "breast"}},
        {"id": "shop", "role": "passive", "data": {"dataset": "breast"}},
    ],
    "model": {"source": {"out_dim": 4}, "top": {"hidden": [8]}},
    "local_updates": {"mode": "celu", "workset": 4, "reuse": 3, "schedule": "sync", "steps": 2},
    "train": {"epochs": 3, "batch_size": 64, "checkpoint_every": 8},
    "validation": {"every": 8},
}
SPEC_TEXT = yaml.safe_dump(JOB)
DATASETS = breast_datasets_config()


def killed_and_resumed(workdir, audit) -> tuple[str, object]:
    """Run the job through daemons with the wire audit on; kill -9 the passive party
    after the first checkpoint, start it again, `vfl resume`; returns (job id, view)."""
    workdir.mkdir()
    daemons = Daemons(workdir)
    daemons.start_coordinator()
    for party, datasets in DATASETS.items():
        daemons.start_party(party, datasets, audit)
    try:
        with daemons.client() as client:
            job_id = client.submit(SPEC_TEXT)
        view = daemons.kill_and_resume(job_id, "shop", DATASETS["shop"], audit)
        return job_id, view
    finally:
        daemons.stop()


def test_a_killed_passive_party_resumes_a_blindfl_job(tmp_path, monkeypatch) -> None:
    # Prepare / Execute
    workdir, audit = tmp_path / "run", tmp_path / "audit"
    job_id, view = killed_and_resumed(workdir, audit)
    # Assert: the metrics of an uninterrupted run with the job's own key pairs
    spec = parse_spec_text(SPEC_TEXT)
    states = {p: StateDir(workdir / f"{p}-state") for p in DATASETS}
    pin_keys(monkeypatch, checkpointed_keys(states, job_id, spec))
    tables = {p: {n: TableSource(**d) for n, d in sets.items()} for p, sets in DATASETS.items()}
    whole = run_inprocess(spec, tables)["bank"]
    for metric, value in whole["metrics"].items():
        assert abs(view.result.metrics[metric] - value) <= 1e-3, metric
    # Assert: one key exchange and layer setup; only allowed payloads, before and after
    records = read_audit(audit)
    sent = [(r["sender"], r["tag"]) for r in records if r["direction"] == "sent"]
    for setup in [("bank", "src/pk"), ("shop", "src/pk"), ("shop", "layout")]:
        assert sent.count(setup) == 1, setup
    last = f"train/r{whole['rounds']}/m2"
    assert ("shop", last) in sent  # the restarted daemon's envelopes are audited too
    assert_only_allowed_payloads(records, {"bank", "shop"})
