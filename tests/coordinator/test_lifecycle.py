"""The life cycle keeps each job's parsed spec (reports and health ticks do not re-parse it)
and folds reports that arrive together without losing one."""

from __future__ import annotations

import threading
import time

import pytest

from coordinator.lifecycle import Lifecycle
from coordinator.spec import JobSpec, parse_spec_text
from coordinator.states import SUCCEEDED, TRAINING
from coordinator.store import JobStore
from proto import coordinator_pb2 as pb
from proto.rpc import PeerClients
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
    life = Lifecycle(store, PeerClients())
    spec = parse_spec_text(job())
    job_id = store.create(spec.job, job(), spec.to_json())
    store.set_state(job_id, TRAINING)
    # Execute
    _report_rounds(life, job_id, 5)
    # Assert
    assert parses == [spec.to_json()]
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
    spec = parse_spec_text(job())
    job_id = store.create(spec.job, job(), spec.to_json())
    store.set_state(job_id, TRAINING)
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
