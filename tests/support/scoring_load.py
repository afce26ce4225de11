"""A burst of concurrent online scoring calls, and what came back: for the overload test
(tests/e2e/test_overload.py) and its bench (bench/overload.py).

One Python process issues about a thousand calls a second at most, and while it issues
them it runs their answers' callbacks late (its one interpreter does both), so a burst
of a thousand from one process measures the client as much as the party. `Clients`
deals a burst's calls out to several client processes, started and connected ahead of
it, each with its own channel, which start issuing together.
"""

from __future__ import annotations

import csv
import multiprocessing
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from vfl.coordinator.client import CoordinatorClient
from vfl.proto import party_pb2 as pb, party_pb2_grpc
from vfl.rpc import Tls, dial, retry_after_s

READY_S = 120.0  # how long client processes may take to start, connect, or fire


@dataclass(frozen=True)
class Outcome:
    """One call: its id, status, seconds from its start to its answer, and its score
    (scored) or retry hint (refused)."""

    id: str
    code: grpc.StatusCode
    seconds: float
    score: float | None = None
    retry_after_s: float | None = None
    details: str = ""


def burst(
    address: str,
    model_id: str,
    ids: list[str],
    calls: int,
    deadline_s: float = 30.0,
    tls: Tls | None = None,
    expect: str | None = None,
) -> list[Outcome]:
    """`calls` Predict calls of one id each (`ids` in turn), all started at once on one
    channel (with `tls`, mutual TLS to party `expect`), each with a deadline of
    `deadline_s`; their outcomes in call order."""
    rows = [ids[n % len(ids)] for n in range(calls)]
    with dial(address, tls, expect) as channel:
        grpc.channel_ready_future(channel).result(timeout=10)
        return _calls(channel, model_id, rows, deadline_s)


class Clients:
    """`processes` client processes, each connected to the party at `address` on a
    channel of its own, which make a burst's calls together (`burst`)."""

    def __init__(self, address: str, processes: int) -> None:
        ctx = multiprocessing.get_context("spawn")  # no fork of a process with gRPC threads
        self._go = ctx.Barrier(processes + 1)  # every burst: all connected, then all call
        self._jobs = [ctx.Queue() for _ in range(processes)]
        self._results: Any = ctx.Queue()
        self._workers = [
            ctx.Process(target=_client, args=(address, jobs, self._go, self._results))
            for jobs in self._jobs
        ]
        for worker in self._workers:
            worker.start()
        for _ in self._workers:  # each connected
            self._results.get(timeout=READY_S)

    def __enter__(self) -> Clients:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def burst(
        self, model_id: str, ids: list[str], calls: int, deadline_s: float = 30.0
    ) -> list[Outcome]:
        """As `burst`, the calls dealt out to the processes (call n to process n mod k)."""
        k = len(self._workers)
        rows = [ids[n % len(ids)] for n in range(calls)]
        for j, jobs in enumerate(self._jobs):
            jobs.put((j, model_id, rows[j::k], deadline_s))
        self._go.wait(READY_S)
        by_worker = dict(self._results.get(timeout=READY_S + deadline_s) for _ in range(k))
        return [by_worker[n % k][n // k] for n in range(calls)]

    def close(self) -> None:
        for jobs in self._jobs:
            jobs.put(None)
        for worker in self._workers:
            worker.join(10)
            if worker.is_alive():
                worker.kill()


def _client(address: str, jobs: Any, go: Any, results: Any) -> None:
    """A client process: connect, then for each job wait for the others and call."""
    with dial(address) as channel:
        grpc.channel_ready_future(channel).result(timeout=READY_S)
        results.put(None)
        while (job := jobs.get()) is not None:
            j, model_id, rows, deadline_s = job
            results.put((j, _calls(channel, model_id, rows, deadline_s, go.wait)))


def _calls(channel, model_id, rows: list[str], deadline_s: float, ready=None) -> list[Outcome]:
    """One call per row, all started at once on `channel` (after `ready(READY_S)`)."""
    stub = party_pb2_grpc.PartyServiceStub(channel)
    requests = [pb.PredictRequest(model_id=model_id, ids=[row]) for row in rows]
    outcomes: list[Outcome | None] = [None] * len(rows)
    done = threading.Semaphore(0)
    if ready is not None:
        ready(READY_S)
    for n, (row, request) in enumerate(zip(rows, requests, strict=True)):
        started = time.monotonic()
        future = stub.Predict.future(request, timeout=deadline_s)
        future.add_done_callback(_recorder(outcomes, n, row, started, done))
    for _ in rows:
        done.acquire()
    return [o for o in outcomes if o is not None]


def _recorder(outcomes, n: int, row: str, started: float, done: threading.Semaphore):
    def record(future) -> None:
        seconds = time.monotonic() - started
        try:
            response = future.result()
        except grpc.RpcError as exc:
            outcomes[n] = Outcome(
                row, exc.code(), seconds, retry_after_s=retry_after_s(exc), details=exc.details()
            )
        else:
            result = response.results[0]
            score = result.values[0] if not result.error else None
            outcomes[n] = Outcome(row, grpc.StatusCode.OK, seconds, score, details=result.message)
        done.release()

    return record


def batch_scores(client: CoordinatorClient, model_id: str, scores_dir: Path) -> dict[str, float]:
    """Every row's score from a batch prediction job (`vfl predict`) with the model, read
    from the active party's scores folder."""
    job_id = client.predict(f"model: {model_id}\ndata: {{bank: breast, shop: breast}}\n")
    deadline = time.monotonic() + 120
    while (view := client.get(job_id)).state not in ("SUCCEEDED", "FAILED", "CANCELLED"):
        if time.monotonic() > deadline:
            raise AssertionError(f"prediction job {job_id} is still {view.state}")
        time.sleep(0.1)
    assert view.state == "SUCCEEDED", view.reason
    with (scores_dir / f"{job_id}.csv").open() as fh:
        return {row["id"]: float(row["score"]) for row in csv.DictReader(fh)}


def percentile(values: list[float], q: float) -> float:
    """The `q`-quantile (0..1) of `values`, nearest rank; 0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


class StateLog:
    """Polls a job's state in a thread and keeps every state it saw, in order."""

    def __init__(self, address: str, job_id: str) -> None:
        self.address, self.job_id = address, job_id
        self.states: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        with CoordinatorClient(self.address) as client:
            while not self._stop.is_set():
                state = client.get(self.job_id).state
                if not self.states or self.states[-1] != state:
                    self.states.append(state)
                if state in ("SUCCEEDED", "FAILED", "CANCELLED"):
                    return
                time.sleep(0.05)

    def wait(self, timeout: float) -> list[str]:
        """The states seen once the job ended (or `timeout` passed)."""
        self._thread.join(timeout)
        self._stop.set()
        return self.states
