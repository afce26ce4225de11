"""Delivering a party daemon's reports to the coordinator, in the background.

A job's thread only queues a report (`ReportSender.post`); one thread per daemon sends
them, oldest first, so training never waits for the network. The queue is bounded
(`Outbox`): a job's newest round report replaces an unsent older one, a job keeps at most
`VALIDATIONS_KEPT` unsent validations, and at most `QUEUE_LIMIT` progress reports wait in
all. The final reports (`done`, `failed`) are never dropped: they are retried until the
coordinator answers, and `pending_final()` lists those still undelivered. Each attempt
says how long its report has waited here (`queued_seconds`): a job that ended while the
coordinator was down is dated to its end, not to the coordinator's return.

While the coordinator cannot be reached the sender logs one warning, and one info line
once it answers again. A report the coordinator refuses (an unknown job, say) is logged
and dropped: sending it again would not help. The coordinator's answer "stop" to a
progress report calls that job's `on_stop`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc
from vfl.contract.logs import job_context
from vfl.coordinator.client import CoordinatorClient
from vfl.proto import coordinator_pb2 as pb
from vfl.rpc import COORDINATOR_ID, explain

log = logging.getLogger(__name__)

FINAL_EVENTS = ("done", "failed")
VALIDATIONS_KEPT = 64  # unsent validations per job (the active party's `done` has them all)
QUEUE_LIMIT = 4096  # unsent progress reports of all jobs; final reports do not count
RETRY_MIN_S, RETRY_MAX_S = 0.2, 5.0  # back-off between attempts while unreachable
_TRANSIENT = (
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.CANCELLED,  # the channel closed under the call (daemon shutting down)
)


@dataclass(frozen=True)
class Pending:
    """One report waiting for delivery, and what to call if the coordinator says stop.
    `settled` is set once it left the queue for good: delivered, refused or dropped."""

    request: pb.ReportProgressRequest
    on_stop: Callable[[], None] | None = None
    settled: threading.Event = field(default_factory=threading.Event, compare=False)
    made_at: float = field(default_factory=time.monotonic, compare=False)

    def stamped(self) -> pb.ReportProgressRequest:
        """The request as sent now: with how long it has waited here (`queued_seconds`),
        so that the coordinator dates its event to when it happened, not to its arrival
        after an outage."""
        request = pb.ReportProgressRequest()
        request.CopyFrom(self.request)
        request.queued_seconds = round(max(0.0, time.monotonic() - self.made_at), 3)
        return request

    @property
    def job_id(self) -> str:
        return self.request.job_id

    @property
    def event(self) -> str:
        return self.request.WhichOneof("event") or ""

    @property
    def final(self) -> bool:
        return self.event in FINAL_EVENTS


class Outbox:
    """Reports waiting for delivery, oldest first, within the bounds of the module doc.

    Not thread-safe: `ReportSender` guards it.
    """

    def __init__(self, validations_kept: int = VALIDATIONS_KEPT, limit: int = QUEUE_LIMIT) -> None:
        self._items: deque[Pending] = deque()
        self._validations_kept = validations_kept
        self._limit = limit

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: Pending) -> list[Pending]:
        """Queue `item` last; returns the reports this dropped to stay within bounds."""
        dropped = []
        if item.event == "round":
            dropped += self._remove(lambda p: p.job_id == item.job_id and p.event == "round")
        self._items.append(item)
        return dropped + self._trim(item.job_id)

    def put_back(self, item: Pending) -> list[Pending]:
        """Return an undelivered `item` to the head of the queue, unless a newer round
        report of its job supersedes it; returns the reports dropped."""
        newer = any(p.job_id == item.job_id and p.event == "round" for p in self._items)
        if item.event == "round" and newer:
            return [item]
        self._items.appendleft(item)
        return self._trim(item.job_id)

    def take(self) -> Pending | None:
        """The oldest report, removed from the queue; None if there is none."""
        return self._items.popleft() if self._items else None

    def drop_progress(self, job_id: str) -> list[Pending]:
        """Drop the unsent progress reports of `job_id` (it ended); keep its final ones."""
        return self._remove(lambda p: p.job_id == job_id and not p.final)

    def finals(self) -> list[Pending]:
        return [p for p in self._items if p.final]

    def _trim(self, job_id: str) -> list[Pending]:
        dropped = []
        validations = [p for p in self._items if p.job_id == job_id and p.event == "validation"]
        for extra in validations[: max(0, len(validations) - self._validations_kept)]:
            self._items.remove(extra)
            dropped.append(extra)
        progress = [p for p in self._items if not p.final]
        for extra in progress[: max(0, len(progress) - self._limit)]:
            self._items.remove(extra)
            dropped.append(extra)
        return dropped

    def _remove(self, match: Callable[[Pending], bool]) -> list[Pending]:
        gone = [p for p in self._items if match(p)]
        for p in gone:
            self._items.remove(p)
        return gone


class ReportSender:
    """Sends one party daemon's reports to its coordinator from a background thread.

    Args:
        client: the coordinator.
        rpc_timeout_s: deadline of one delivery attempt.
    """

    def __init__(self, client: CoordinatorClient, rpc_timeout_s: float = 10.0) -> None:
        self._client = client
        self._rpc_timeout_s = rpc_timeout_s
        self._cond = threading.Condition()
        self._outbox = Outbox()
        self._inflight: Pending | None = None
        self._closing: float | None = None  # monotonic deadline of the last deliveries
        self._wake = threading.Event()  # ends a back-off wait early (on close)
        self._unreachable = False  # only the sender thread reads and writes it
        self._thread = threading.Thread(target=self._loop, name="coordinator-reports", daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        return self._client.address

    def post(
        self, request: pb.ReportProgressRequest, on_stop: Callable[[], None] | None = None
    ) -> threading.Event:
        """Queue a report for delivery; never waits for the network. Returns an event set
        once the report is settled (delivered, refused or dropped). After `close` a report
        is only kept: a final one shows in `pending_final()`."""
        item = Pending(request, on_stop)
        with self._cond:
            dropped = self._outbox.put(item)
            self._cond.notify_all()
        _settle_dropped(dropped)
        return item.settled

    def pending_final(self) -> dict[str, list[pb.ReportProgressRequest]]:
        """The final reports (`done`, `failed`) the coordinator has not acknowledged yet,
        by job id."""
        with self._cond:
            items = self._outbox.finals()
            if self._inflight is not None and self._inflight.final:
                items.insert(0, self._inflight)
        out: dict[str, list[pb.ReportProgressRequest]] = {}
        for p in items:
            out.setdefault(p.job_id, []).append(p.request)
        return out

    def flush(self, timeout: float) -> bool:
        """Wait until every queued report was delivered (or dropped); False on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._outbox or self._inflight is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def close(self, timeout: float = 2.0) -> None:
        """Send what is queued for up to `timeout` seconds (while the coordinator answers),
        then stop; final reports still undelivered are logged."""
        with self._cond:
            if self._closing is None:
                self._closing = time.monotonic() + timeout
            self._cond.notify_all()
        self._wake.set()
        self._thread.join(timeout + 0.5)  # a call still in flight ends when the client closes
        for job_id, reports in self.pending_final().items():
            events = ", ".join(r.WhichOneof("event") or "?" for r in reports)
            log.warning(
                "job %s: final report '%s' was not delivered to the coordinator at %s",
                job_id,
                events,
                self.address,
            )

    # --- the sender thread ---------------------------------------------------------

    def _loop(self) -> None:
        delay = RETRY_MIN_S
        while True:
            item = self._next()
            if item is None:
                return
            delivered = self._deliver(item)
            with self._cond:
                self._inflight = None
                dropped = [] if delivered else self._outbox.put_back(item)
                self._cond.notify_all()
                closing = self._closing is not None
            _settle_dropped(dropped)
            if delivered:
                item.settled.set()
                delay = RETRY_MIN_S
                continue
            if closing:
                return  # shutting down: no waiting for the coordinator
            self._wake.wait(delay)
            delay = min(delay * 2, RETRY_MAX_S)

    def _next(self) -> Pending | None:
        """The next report to send (marked in flight); None once the sender should stop."""
        with self._cond:
            while not self._outbox and self._closing is None:
                self._cond.wait()
            if self._closing is not None and time.monotonic() >= self._closing:
                return None
            self._inflight = self._outbox.take()
            return self._inflight

    def _deliver(self, item: Pending) -> bool:
        """Send one report; False if it should be sent again (the coordinator is away)."""
        try:
            stop = self._client.report(item.stamped(), timeout=self._timeout())
        except grpc.RpcError as exc:
            if exc.code() in _TRANSIENT:
                self._went_away(exc)
                return False
            self._came_back()
            with job_context(item.job_id):
                log.warning(
                    "the coordinator refused report '%s' (%s: %s); it is dropped",
                    item.event,
                    exc.code().name,
                    exc.details(),
                )
            return True
        except ValueError as exc:  # the client's channel was closed: the daemon stops
            log.warning("report '%s' of job %s not sent: %s", item.event, item.job_id, exc)
            return True
        self._came_back()
        if stop and not item.final:
            with self._cond:
                dropped = self._outbox.drop_progress(item.job_id)
            _settle_dropped(dropped)
            if item.on_stop is not None:
                item.on_stop()
        return True

    def _timeout(self) -> float:
        with self._cond:
            closing = self._closing
        if closing is None:
            return self._rpc_timeout_s
        return max(0.1, min(self._rpc_timeout_s, closing - time.monotonic()))

    def _went_away(self, exc: grpc.RpcError) -> None:
        if self._unreachable:
            return
        self._unreachable = True
        why = explain(exc, self.address, self._client.tls, COORDINATOR_ID)
        log.warning(
            "reports to the coordinator wait until it answers again (training goes on): %s",
            why,
        )

    def _came_back(self) -> None:
        if not self._unreachable:
            return
        self._unreachable = False
        with self._cond:
            queued = len(self._outbox)
        log.info(
            "the coordinator at %s answers again; delivering the reports kept meanwhile "
            "(%d still queued)",
            self.address,
            queued,
        )


def _settle_dropped(dropped: list[Pending]) -> None:
    for p in dropped:
        p.settled.set()
        log.debug(
            "job %s: unsent report '%s' dropped (superseded or over bounds)", p.job_id, p.event
        )
