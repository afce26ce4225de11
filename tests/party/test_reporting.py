"""A party's reports: queued by the job, sent in the background, kept while the
coordinator is away; its answer "stop" still stops the job."""

from __future__ import annotations

import logging
import socket
import threading
import time
from pathlib import Path

import pytest
from vfl.contract.spec import parse_spec_text
from vfl.contract.states import CANCELLED, TRAINING
from vfl.coordinator.client import CoordinatorClient
from vfl.coordinator.server import create_coordinator_server
from vfl.coordinator.store import JobStore
from vfl.party.report_sender import Outbox, Pending, ReportSender
from vfl.party.reporting import CoordinatorReporter, split_metrics
from vfl.proto import coordinator_pb2 as pb

from tests.support.jobs import job

pytestmark = pytest.mark.alone  # bounds on seconds: run without other tests beside it


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stored_job(db: Path, state=TRAINING, reason: str = "", started_at: float = 0.0) -> str:
    """A job in a coordinator's database, as the coordinator left it (launched at
    `started_at`, if given)."""
    store = JobStore(db)
    try:
        spec = parse_spec_text(job())
        job_id = store.create(spec.job, job(), spec.to_json())
        launched = pb.JobResult(job=job_id, started_at=started_at) if started_at else None
        store.set_state(job_id, state, reason, result=launched)
        return job_id
    finally:
        store.close()


def _party_logs(caplog, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("vfl.party") and r.levelno == level]


@pytest.mark.grpc
def test_training_never_waits_for_an_absent_coordinator_and_done_waits_for_it(
    tmp_path, caplog
) -> None:
    # Prepare: a party whose coordinator address has no listener (yet)
    caplog.set_level(logging.INFO, logger="vfl.party")
    port = _free_port()
    job_id = _stored_job(tmp_path / "jobs.sqlite")
    client = CoordinatorClient(f"127.0.0.1:{port}")
    sender = ReportSender(client)
    reporter = CoordinatorReporter(sender, job_id, "bank", lambda: None)
    coord = None
    try:
        # Execute: 200 rounds with validations, then the final report
        started, rounds = time.monotonic(), 0
        reporter.stage(TRAINING)
        for rnd in range(1, 201):
            reporter.round(rnd, 200, 0.5)
            if rnd % 20 == 0:
                reporter.validation(rnd, {"auc": 0.9})
            rounds += 1
            if time.monotonic() - started > 3.0:
                break  # the old, blocking reporter takes ~1.4 s per report
        elapsed = time.monotonic() - started
        reporter.done({"rounds": 200, "metrics": {"auc": 0.9}})
        deadline = time.monotonic() + 30
        while not _party_logs(caplog, logging.WARNING) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # more failed attempts: still one warning
        pending = sender.pending_final()
        coord = create_coordinator_server(str(tmp_path / "jobs.sqlite"), f"127.0.0.1:{port}")
        delivered = sender.flush(timeout=60)
        with CoordinatorClient(f"127.0.0.1:{coord.port}") as reader:
            view = reader.get(job_id)
    finally:
        sender.close(0)
        client.close()
        if coord is not None:
            coord.stop(0)
    # Assert: full speed, one warning without a traceback, done kept, then delivered
    assert rounds == 200 and elapsed < 0.5, f"{rounds} rounds took {elapsed:.2f} s"
    assert [r.WhichOneof("event") for r in pending[job_id]] == ["done"]
    assert delivered and sender.pending_final() == {}
    assert "bank" in view.result.parties and view.result.round == 200
    assert view.result.metrics["auc"] == pytest.approx(0.9)
    warnings = _party_logs(caplog, logging.WARNING)
    assert len(warnings) == 1, [w.getMessage() for w in warnings]
    assert warnings[0].exc_info is None and "\n" not in warnings[0].getMessage()
    assert f"127.0.0.1:{port}" in warnings[0].getMessage()
    resumed = [r for r in _party_logs(caplog, logging.INFO) if "answers again" in r.getMessage()]
    assert len(resumed) == 1


@pytest.mark.grpc
def test_the_coordinators_stop_answer_stops_the_job_at_the_party(tmp_path) -> None:
    job_id = _stored_job(tmp_path / "jobs.sqlite", CANCELLED, "cancelled by the user")
    coord = create_coordinator_server(str(tmp_path / "jobs.sqlite"), "127.0.0.1:0")
    client = CoordinatorClient(f"127.0.0.1:{coord.port}")
    sender = ReportSender(client)
    stopped = threading.Event()
    try:
        CoordinatorReporter(sender, job_id, "bank", stopped.set).round(1, 10, 0.5)
        assert stopped.wait(30)
    finally:
        sender.close(0)
        client.close()
        coord.stop(0)


@pytest.mark.grpc
def test_a_job_that_ended_while_the_coordinator_was_down_reports_its_own_duration(
    tmp_path,
) -> None:
    # Prepare: a job launched 1 s ago; its coordinator is down
    port = _free_port()
    job_id = _stored_job(tmp_path / "jobs.sqlite", started_at=time.time() - 1.0)
    client = CoordinatorClient(f"127.0.0.1:{port}")
    sender = ReportSender(client)
    coord = None
    try:
        # Execute: both parties end now, and the coordinator is back 4 s later
        for party in ("bank", "shop"):
            request = pb.ReportProgressRequest(
                job_id=job_id, party_id=party, done=pb.PartyDone(rounds=5, seconds=0.9)
            )
            sender.post(request)
        time.sleep(4.0)
        coord = create_coordinator_server(str(tmp_path / "jobs.sqlite"), f"127.0.0.1:{port}")
        assert sender.flush(timeout=60)
        with CoordinatorClient(f"127.0.0.1:{coord.port}") as reader:
            view = reader.get(job_id)
    finally:
        sender.close(0)
        client.close()
        if coord is not None:
            coord.stop(0)
    # Assert: about the 1 s the job ran, not the 5 s until the coordinator heard of its end
    assert view.state == "SUCCEEDED"
    assert 1.0 <= view.result.seconds < 2.5, view.result.seconds
    ended = {p: t.ended_at for p, t in view.result.parties.items()}
    assert max(ended.values()) - view.result.started_at == pytest.approx(
        view.result.seconds, abs=1e-3
    )


def _report(job_id: str, **event) -> Pending:
    return Pending(pb.ReportProgressRequest(job_id=job_id, party_id="bank", **event))


def _round(job_id: str, rnd: int) -> Pending:
    return _report(job_id, round=pb.RoundDone(round=rnd, total_rounds=100))


def _events(box: Outbox) -> list[tuple[str, str, int]]:
    out = []
    while (p := box.take()) is not None:
        out.append((p.job_id, p.event, getattr(p.request, p.event).round))
    return out


def test_the_newest_round_replaces_an_unsent_one_and_validations_are_bounded() -> None:
    box = Outbox(validations_kept=2, limit=100)
    box.put(_round("a", 1))
    box.put(_round("b", 1))
    for rnd in (10, 20, 30):
        box.put(_report("a", validation=pb.Validated(round=rnd)))
    box.put(_round("a", 31))
    assert _events(box) == [
        ("b", "round", 1),
        ("a", "validation", 20),
        ("a", "validation", 30),
        ("a", "round", 31),
    ]


def test_final_reports_are_never_dropped_and_a_stale_round_is_not_put_back() -> None:
    box = Outbox(validations_kept=1, limit=2)
    box.put(_report("a", done=pb.PartyDone(rounds=5)))
    for rnd in range(1, 5):
        box.put(_report("b", validation=pb.Validated(round=rnd)))
        box.put(_report(f"c{rnd}", stage=pb.StageReached(state=TRAINING)))
    stale = _round("a", 3)
    box.put(_round("a", 4))
    assert box.put_back(stale) == [stale]
    assert [p.event for p in box.finals()] == ["done"]
    assert len(box) == 3  # the final report and the two newest progress reports
    assert box.drop_progress("a") and [p.event for p in box.finals()] == ["done"]


def test_only_finite_metrics_are_reported_as_numbers_the_rest_say_why() -> None:
    numbers, undefined = split_metrics(
        {"auc": float("nan"), "accuracy": 0.5, "logloss": float("inf"), "r2": float("nan")}
    )
    assert numbers == {"accuracy": 0.5}
    assert "one class" in undefined["auc"] and "do not vary" in undefined["r2"]
    assert (
        undefined["logloss"].startswith("not finite (inf)") and "train.lr" in undefined["logloss"]
    )
