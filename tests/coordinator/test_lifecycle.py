"""The life cycle keeps each job's parsed spec (reports and health ticks do not re-parse it),
folds reports that arrive together without losing one, and logs every job's end with its
reason, and every cancellation."""

from __future__ import annotations

import logging
import threading
import time

import pytest
from vfl.contract.spec import JobSpec, parse_spec_text
from vfl.contract.states import SUCCEEDED, TRAINING
from vfl.coordinator.lifecycle import Lifecycle
from vfl.coordinator.store import JobStore
from vfl.proto import coordinator_pb2 as pb
from vfl.rpc import PeerClients

from tests.support.jobs import job


@pytest.fixture
def parses(monkeypatch) -> list[str]:
    """The spec JSON texts parsed while the test runs."""
    texts: list[str] = []
    original = JobSpec.from_json

    def counting(cls, text):
        texts.append(text)
        return original(text)

    monkeypatch.setattr(JobSpec, "from_json", classmethod(counting))
    return texts


def _report_rounds(life: Lifecycle, job_id: str, rounds: int) -> None:
    for rnd in range(1, rounds + 1):
        done = pb.RoundDone(round=rnd, total_rounds=9, loss=0.5)
        life.report("bank", pb.ReportProgressRequest(job_id=job_id, party_id="bank", round=done))
        life.check_parties(grace_s=60.0)


def test_a_stored_job_is_parsed_once_then_kept(tmp_path, parses) -> None:
    # Prepare: a job in the store as after a coordinator restart
    store = JobStore(tmp_path / "jobs.sqlite")
    job_id = _stored(store, "t")
    life = Lifecycle(store, PeerClients())
    # Execute
    _report_rounds(life, job_id, 5)
    # Assert
    assert parses == [parse_spec_text(job(name="t")).to_json()]
    assert store.get(job_id).result.round == 5


def test_a_submitted_job_is_never_parsed_again(tmp_path, parses) -> None:
    store = JobStore(tmp_path / "jobs.sqlite")
    life = Lifecycle(store, PeerClients())
    job_id = life.submit(job())  # no party registered: its launch fails in the background
    _report_rounds(life, job_id, 3)
    life.cancel(job_id)
    life.join(10.0)
    assert parses == []


def test_reports_arriving_together_lose_nothing(tmp_path, monkeypatch) -> None:
    # Prepare: a training job whose result writes take a while (as an fsync can)
    store = JobStore(tmp_path / "jobs.sqlite")
    life = Lifecycle(store, PeerClients())
    job_id = _stored(store, "t")
    write = store.update_result
    monkeypatch.setattr(store, "update_result", lambda *a: (time.sleep(0.2), write(*a)))

    def done(party: str) -> None:
        request = pb.ReportProgressRequest(job_id=job_id, party_id=party, done=pb.PartyDone())
        life.report(party, request)

    # Execute: both parties report their end at once
    threads = [threading.Thread(target=done, args=(p,)) for p in ("bank", "shop")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Assert: neither report overwrote the other
    record = store.get(job_id)
    assert set(record.result.parties) == {"bank", "shop"}
    assert record.state == SUCCEEDED


def _stored(store: JobStore, name: str) -> str:
    """A job in TRAINING, as after its launch."""
    spec = parse_spec_text(job(name=name))
    job_id = store.create(spec.job, job(name=name), spec.to_json())
    store.set_state(job_id, TRAINING)
    return job_id


def _report(life: Lifecycle, job_id: str, party: str, **event) -> None:
    life.report(party, pb.ReportProgressRequest(job_id=job_id, party_id=party, **event))


def test_the_log_names_every_jobs_end_its_reason_and_each_cancellation(tmp_path, caplog) -> None:
    # Prepare
    caplog.set_level(logging.INFO, logger="vfl.coordinator")
    store = JobStore(tmp_path / "jobs.sqlite")
    life = Lifecycle(store, PeerClients(), register_wait_s=0)  # unregistered: fail at once
    # Execute: a job whose parties never registered, one cancelled (twice), one a party
    # failed, one that succeeded, and one whose parties stopped answering (paused)
    unregistered = life.submit(job(name="unregistered"))
    life.join(10.0)
    cancelled = _stored(store, "cancelled")
    life.cancel(cancelled)
    life.cancel(cancelled)
    failed = _stored(store, "failed")
    _report(life, failed, "shop", failed=pb.PartyFailed(reason="party 'shop': disk full"))
    succeeded = _stored(store, "succeeded")
    for party in ("bank", "shop"):
        _report(life, succeeded, party, done=pb.PartyDone(rounds=40))
    for party in ("bank", "shop"):
        life.register(party, "127.0.0.1:1", ["breast"])  # nothing listens there
    silent = _stored(store, "silent")
    life.check_parties(grace_s=0.0)
    life.join(10.0)
    # Assert
    lines = [
        r.getMessage()
        for r in caplog.records
        if r.name == "vfl.coordinator.lifecycle" and r.levelno == logging.INFO
    ]
    assert any(f"job {unregistered} FAILED" in m and "never registered" in m for m in lines)
    assert [m for m in lines if cancelled in m] == [
        f"job {cancelled}: cancel requested by the user (it was TRAINING)",
        f"job {cancelled} CANCELLED: cancelled by the user",
        f"job {cancelled}: cancel requested, but it had already ended CANCELLED",
    ]
    assert f"job {failed} FAILED: party 'shop': disk full" in lines
    assert f"job {succeeded} SUCCEEDED: every party reported done (40 rounds)" in lines
    assert any(
        f"job {silent} PAUSED: party 'bank'" in m and "stopped answering" in m for m in lines
    )
    ends = [m for m in lines if any(s in m for s in ("SUCCEEDED", "FAILED", "CANCELLED:"))]
    assert len(ends) == 4  # one line per end (the silent job is paused, not ended)


def test_concurrent_reports_of_two_parties_lose_nothing(tmp_path) -> None:
    # The active party's round reports and the passive party's `done` arrive at once (on
    # the servicer's threads); a lost `done` left jobs running until the health monitor
    # failed them for a party that "lost" the job.
    store = JobStore(tmp_path / "jobs.sqlite")
    life = Lifecycle(store, PeerClients())
    jobs = [_stored(store, f"race{i}") for i in range(40)]
    for job_id in jobs:
        rounds = threading.Thread(
            target=lambda j=job_id: [
                _report(life, j, "bank", round=pb.RoundDone(round=r, total_rounds=99))
                for r in range(1, 40)
            ]
        )
        rounds.start()
        _report(life, job_id, "shop", done=pb.PartyDone(rounds=99))
        rounds.join()
    lost = [j for j in jobs if "shop" not in store.get(j).result.parties]
    assert lost == [] and all(store.get(j).result.round == 39 for j in jobs)


def test_a_metric_that_is_not_finite_is_kept_as_undefined_and_the_job_ends(tmp_path) -> None:
    # Prepare: a party that sends NaN and infinity as numbers (the reports of a party of an
    # older release, or a diverged model) must not leave its job waiting for refused reports
    store = JobStore(tmp_path / "jobs.sqlite")
    life = Lifecycle(store, PeerClients())
    job_id = _stored(store, "t")
    nan, inf = float("nan"), float("inf")
    # Execute
    _report(life, job_id, "bank", round=pb.RoundDone(round=1, total_rounds=2, loss=nan))
    _report(life, job_id, "bank", validation=pb.Validated(round=1, metrics={"auc": nan}))
    validated = store.get(job_id).result
    for party in ("bank", "shop"):
        done = pb.PartyDone(
            rounds=2,
            metrics={"auc": nan, "logloss": inf, "accuracy": 0.5},
            undefined={"r2": "the labels validated on do not vary"},
        )
        _report(life, job_id, party, done=done)
    # Assert
    assert validated.undefined_metrics["auc"] == "not finite (nan)" and not validated.metrics
    assert not validated.HasField("loss")
    record = store.get(job_id)
    assert record.state == SUCCEEDED
    assert dict(record.result.metrics) == {"accuracy": 0.5}
    assert dict(record.result.undefined_metrics) == {
        "auc": "not finite (nan)",
        "logloss": "not finite (inf)",
        "r2": "the labels validated on do not vary",
    }
