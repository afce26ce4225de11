"""Many clients following jobs do not slow the coordinator down.

The coordinator and two parties run as `vfl ... serve` processes with mutual TLS, the
parties over an emulated WAN (20 ms round trips, as between organisations), so that a
job's time is mostly its rounds' latency rather than a share of this machine's two
cores. One job runs alone first; then four run at once on the same two parties while 50
clients follow them (`vfl watch`'s code: `progress.follow` over `WatchJob`) and `vfl jobs`
(ListJobs) is timed over and over. Each job must take about as long as the one alone
(within `SLOWDOWN`: the machine is shared), every follower must see its job end, and
ListJobs must always answer within a second. With a thread per follower (16 threads),
the followers held every thread and the parties' reports stalled.
"""

from __future__ import annotations

import statistics
import threading
import time
from pathlib import Path

import grpc
import pytest
from vfl.cli import progress
from vfl.contract.spec import parse_spec_text
from vfl.coordinator.client import CoordinatorClient, JobView
from vfl.local.run import LocalTopology, spec_to_yaml
from vfl.secure.pki.federation import ADMIN_ID, load_identity, local_federation

from tests.support.data import FATE

pytestmark = [pytest.mark.subprocess, pytest.mark.alone]

JOBS, WATCHERS = 4, 50
SLOWDOWN = 3.0  # a job among four with 50 followers may take this many times one alone
LIST_WITHIN_S = 1.0
LIMIT_S = 120.0  # the four jobs take seconds; without an answer by then, the test fails

SPEC = f"""
job: load
parties:
  - {{id: bank, role: active, data: {{path: {FATE}/breast_hetero_guest.csv, label: y}}}}
  - {{id: shop, role: passive, data: {{path: {FATE}/breast_hetero_host.csv}}}}
train: {{epochs: 10, batch_size: 64}}
validation: {{every: 20}}
network: {{bandwidth_mbps: 100, rtt_ms: 20}}
"""


@pytest.fixture
def topology(tmp_path: Path):
    tls = local_federation(tmp_path / "tls", ("coordinator", ADMIN_ID, "bank", "shop"))
    topo = LocalTopology(tmp_path, tls_dir=tls)
    try:
        spec = topo.start(parse_spec_text(SPEC))
        yield topo.coordinator_address, load_identity(tls, ADMIN_ID), spec
    finally:
        topo.stop()


def seconds(view: JobView) -> float:
    """Submit to end, by the coordinator's clock."""
    return view.updated_at - view.created_at


def follow(address: str, admin, job_id: str, seen: list[JobView]) -> None:
    """Follow a job as `vfl watch` does; keep the last view (none if the call failed)."""
    with CoordinatorClient(address, admin) as client:
        try:
            seen.append(progress.follow(client, job_id, show=False))
        except grpc.RpcError:
            pass  # counted as missing


def list_latencies(address: str, admin, until: threading.Event) -> list[float]:
    """Time ListJobs every 0.1 s until `until` is set (a call that fails or takes more than
    5 s counts with the time it took)."""
    latencies = []
    with CoordinatorClient(address, admin, timeout=5.0) as client:
        while not until.is_set():
            start = time.monotonic()
            try:
                client.jobs()
            except grpc.RpcError:
                pass
            latencies.append(time.monotonic() - start)
            until.wait(0.1)
    return latencies


def test_fifty_followers_slow_neither_jobs_nor_listing(topology) -> None:
    # Prepare: a first job warms the daemons up; the second, alone, is the yardstick
    address, admin, spec = topology

    def named(name: str) -> str:
        return spec_to_yaml(spec.model_copy(update={"job": name}))

    with CoordinatorClient(address, admin) as client:
        progress.follow(client, client.submit(named("warm")), show=False)
        alone = progress.follow(client, client.submit(named("alone")), show=False)
        assert alone.state == "SUCCEEDED", alone.reason
        # Execute: four jobs at once, 50 followers, ListJobs timed throughout
        ids = [client.submit(named(f"busy{i}")) for i in range(JOBS)]
        seen: list[JobView] = []
        followers = [
            threading.Thread(target=follow, args=(address, admin, ids[i % JOBS], seen), daemon=True)
            for i in range(WATCHERS)
        ]
        for thread in followers:
            thread.start()
        ended = threading.Event()
        latencies: list[float] = []
        timer = threading.Thread(
            target=lambda: latencies.extend(list_latencies(address, admin, ended)), daemon=True
        )
        timer.start()
        deadline = time.monotonic() + LIMIT_S
        for thread in followers:
            thread.join(max(0.0, deadline - time.monotonic()))
        ended.set()
        timer.join()
        views = [client.get(job_id) for job_id in ids]
    # Assert
    took = [seconds(v) if v.state == "SUCCEEDED" else float("inf") for v in views]
    print(
        f"\none job alone {seconds(alone):.2f} s; {JOBS} jobs with {WATCHERS} followers "
        f"{', '.join(f'{t:.2f}' for t in took)} s; ListJobs {len(latencies)} calls, median "
        f"{statistics.median(latencies) * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms"
    )
    assert [v.state for v in views] == ["SUCCEEDED"] * JOBS, [v.reason for v in views]
    assert len(seen) == WATCHERS and {v.state for v in seen} == {"SUCCEEDED"}
    assert {v.result.round for v in seen} == {alone.result.round}
    assert max(took) <= SLOWDOWN * seconds(alone), (took, seconds(alone))
    assert max(latencies) < LIST_WITHIN_S, sorted(latencies)[-5:]
