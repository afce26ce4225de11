"""The coordinator's gRPC server in this process: clients following jobs hold no thread, so
however many follow, parties' reports, registrations and `vfl jobs` still answer at once.

(With a thread per call, 16 followers took every thread of the server and stalled the
whole coordinator, parties' reports included.)
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import grpc
import pytest
from vfl.contract.spec import parse_spec_text
from vfl.coordinator.client import CoordinatorClient, JobView
from vfl.coordinator.server import create_coordinator_server
from vfl.proto import coordinator_pb2 as pb

from tests.support.jobs import job

pytestmark = pytest.mark.grpc

JOBS, PER_JOB = 8, 5  # 40 followers, well over the old server's 16 threads
ANSWER_S = 1.0


@pytest.fixture
def coordinator(tmp_path: Path):
    """A coordinator alone (no party daemons) holding JOBS jobs that are never launched."""
    coord = create_coordinator_server(str(tmp_path / "jobs.sqlite"), "127.0.0.1:0")
    spec = parse_spec_text(job())
    ids = [coord.lifecycle.store.create(f"held{i}", job(), spec.to_json()) for i in range(JOBS)]
    yield f"127.0.0.1:{coord.port}", ids, coord
    coord.stop(0)


class Follower(threading.Thread):
    """Follows one job as `vfl watch` does, keeping every view it receives."""

    def __init__(self, address: str, job_id: str) -> None:
        super().__init__(daemon=True)
        self.client = CoordinatorClient(address)
        self.job_id = job_id
        self.views: list[JobView] = []

    def run(self) -> None:
        try:
            for view in self.client.watch(self.job_id):
                self.views.append(view)
        except grpc.RpcError:
            pass  # the test is over (the server stopped)


def timed(fn, *args):
    start = time.monotonic()
    out = fn(*args)
    return out, time.monotonic() - start


def wait_for(condition, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    return condition()


def test_forty_followers_stall_neither_reports_nor_listing(coordinator) -> None:
    # Prepare: 40 clients follow the 8 jobs
    address, ids, _ = coordinator
    followers = [Follower(address, ids[i % JOBS]) for i in range(JOBS * PER_JOB)]
    for f in followers:
        f.start()
    assert wait_for(lambda: sum(bool(f.views) for f in followers) >= 16)
    # Execute: a party registers and reports while they follow; a user lists the jobs
    with CoordinatorClient(address, timeout=5.0) as client:
        _, registered_s = timed(client.register, "bank", "127.0.0.1:7701", ["breast"])
        stage = pb.StageReached(state=pb.JOB_STATE_ALIGNING)
        report = pb.ReportProgressRequest(job_id=ids[0], party_id="bank", stage=stage)
        _, reported_s = timed(client.report, report)
        jobs, listed_s = timed(client.jobs)
        # Assert: each answered within a second; every follower was answered, and the
        # followers of the reported job saw its new state
        assert max(registered_s, reported_s, listed_s) < ANSWER_S
        assert len(jobs) == JOBS
        assert wait_for(lambda: all(f.views for f in followers))
        first = [f for f in followers if f.job_id == ids[0]]
        assert wait_for(lambda: all(f.views[-1].state == "ALIGNING" for f in first), ANSWER_S)
        # Execute: the jobs end; every follower's stream ends with the end state
        for job_id in ids:
            client.cancel(job_id)
    for f in followers:
        f.join(timeout=5)
    assert not any(f.is_alive() for f in followers)
    assert {f.views[-1].state for f in followers} == {"CANCELLED"}
    for f in followers:
        f.client.close()


def test_following_an_unknown_job_is_not_found(coordinator) -> None:
    address, *_ = coordinator
    with CoordinatorClient(address) as client, pytest.raises(grpc.RpcError) as err:
        next(iter(client.watch("no-such-job")))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND and "vfl jobs" in err.value.details()


def test_clients_that_go_away_are_no_longer_followed(coordinator) -> None:
    address, ids, coord = coordinator
    followers = [Follower(address, ids[0]) for _ in range(5)]
    for f in followers:
        f.start()
    assert wait_for(lambda: coord.servicer.feeds.watched() == {ids[0]: 5})
    for f in followers:
        f.client.close()  # e.g. Ctrl-C in `vfl watch`
    assert wait_for(lambda: coord.servicer.feeds.watched() == {}, timeout=5.0)
