"""Micro-batching of concurrent online scoring requests for one model.

Requests queue; one worker thread takes the queued ones as a micro-batch once it holds
`max_ids` ids or `delay_s` after the oldest request arrived, whichever comes first, and
runs them as one call. While a batch runs, new requests queue, so under load batches
fill up and a lone request waits at most `delay_s` (docs/architecture.md, "Online
scoring": 64 ids, 2 ms).

Admission: a request is queued if it can be answered within its time (`within`: the
party's `scoring.deadline_s`, or the call's own deadline if sooner), by the measured cost
of the model's batches (`party.inference.capacity`): the rest of the batch that runs,
then the ids queued ahead of it and its own, in full batches. A request that finds the
queue empty is always queued (one batch ahead at most; and the cost is measured again).
One that does not fit, or that finds `max_queued` requests waiting, is refused at once
(`Overloaded`, with a retry hint), never queued past its time. After each batch, with
its cost measured again, a queued request that would now be answered after its caller
stopped waiting (`deadline`: the call's own gRPC deadline) is refused then, rather than
scored for no one; the first in the queue never is. One admitted on a cost that proved
too low (a burst's first full batches cost more than a quiet model's lone ones; a pause;
other work on the machine) but still awaited is scored, if late for `within`.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from vfl.party.errors import Overloaded
from vfl.party.inference.capacity import BatchCost
from vfl.rpc.planes import MIN_RETRY_S, busy_message

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)

MAX_IDS = 64
DELAY_S = 0.002
MAX_QUEUED = 1024  # requests waiting for a batch, by default
QUEUE_FULL = "model queue"  # where a refusal happened (`Overloaded.at`): `max_queued`
NO_CAPACITY = "model capacity"  # ... the model's batches cannot answer it in its time


def _held_lock() -> threading.Lock:
    lock = threading.Lock()
    lock.acquire()
    return lock


@dataclass
class _Request(Generic[K, T]):
    """One request; `done` is held until it is answered (a lock is the cheapest thing a
    thread can wait on, and a burst makes a thousand of them)."""

    ids: list[K]
    deadline: float | None = None  # the seconds its caller waits
    due: float = math.inf  # when its caller stops waiting (monotonic seconds)
    done: threading.Lock = field(default_factory=_held_lock)
    results: dict[K, T] | None = None
    error: BaseException | None = None


class MicroBatcher(Generic[K, T]):
    """Runs `run(unique ids)` (which returns one result per id) for batches of requests.

    Args:
        run: scores a micro-batch; what it raises, every request of the batch raises.
        name: the worker thread's name.
        max_queued: requests that may wait for a batch; one more is refused.
        busy: what a refusal for a full queue says, before "; retry in N s".
        late: what a refusal for capacity says (formatted with `within`, the seconds
            the request had), before "; retry in N s".
    """

    def __init__(
        self,
        run: Callable[[list[K]], dict[K, T]],
        name: str,
        max_ids: int = MAX_IDS,
        delay_s: float = DELAY_S,
        max_queued: int = MAX_QUEUED,
        busy: str = "the queue is full",
        late: str = "the queue cannot be scored within {within:.2g} s",
    ) -> None:
        self._run, self.max_ids, self.delay_s = run, max_ids, delay_s
        self.max_queued, self.busy, self.late = max_queued, busy, late
        self.cost = BatchCost(max_ids)
        self.refused = 0  # requests refused (a full queue, or no capacity)
        self._cond = threading.Condition()
        self._queue: deque[_Request[K, T]] = deque()
        self._queued_ids = 0  # ids of the queued requests
        self._running: tuple[int, float] | None = None  # the batch's ids, its start
        self._discount_s = 0.0  # of the running batch: one-off work not to count
        self._closed: BaseException | None = None
        self.batches = 0  # micro-batches run
        self.requests = 0  # requests answered
        self._worker = threading.Thread(target=self._loop, name=name, daemon=True)
        self._worker.start()

    def submit(
        self,
        ids: list[K],
        timeout: float,
        within: float | None = None,
        deadline: float | None = None,
    ) -> dict[K, T]:
        """Queue `ids` and wait for their results.

        Args:
            timeout: the most seconds to wait for them.
            within: admit the request only if its batch is estimated to end within
                these seconds (None: whatever the wait).
            deadline: the seconds its caller waits; once the batches, as measured
                after each, would answer it later, it is refused (None: never).

        Raises:
            Overloaded: `max_queued` requests wait already, or those ahead of it and it
                would not be scored `within` (at once, with a retry hint), or not
                before its `deadline` (once a batch measured shows it).
            TimeoutError: no answer within `timeout` seconds.
            Whatever `run` raised for the batch, or the reason the batcher was closed.
        """
        request: _Request[K, T] = _Request(list(ids), deadline)
        with self._cond:
            if self._closed is not None:
                raise self._closed
            self._admit(len(request.ids), within)
            if deadline is not None:
                request.due = time.monotonic() + deadline
            self._queue.append(request)
            self._queued_ids += len(request.ids)
            self._cond.notify_all()
        if not request.done.acquire(timeout=timeout):
            raise TimeoutError(f"no answer within {timeout:.0f} s")
        if request.error is not None:
            raise request.error
        assert request.results is not None
        return request.results

    @property
    def queued(self) -> int:
        """Requests waiting for a batch."""
        with self._cond:
            return len(self._queue)

    def wait_s(self, ids: int) -> float:
        """About how long a request of `ids` ids queued now would wait for its answer."""
        with self._cond:
            return self._wait_s(ids)

    def discount(self, seconds: float) -> None:
        """Leave `seconds` of the running batch out of its measured cost (one-off work:
        a scoring session opened). Called by `run`, on the worker thread."""
        self._discount_s += seconds

    def _admit(self, ids: int, within: float | None) -> None:
        """Raises `Overloaded` if a request of `ids` ids may not queue now (under the
        condition's lock)."""
        if len(self._queue) >= self.max_queued:
            self.refused += 1
            seconds = max(MIN_RETRY_S, self._wait_s(0))
            raise Overloaded(busy_message(self.busy, seconds), seconds, QUEUE_FULL)
        if within is None or not self._queue:
            return
        wait = self._wait_s(ids)
        if wait > within:
            self.refused += 1
            raise self._too_late(within, wait - within)

    def _too_late(self, within: float, over: float) -> Overloaded:
        """The refusal of a request that would be answered `over` seconds after its time:
        retry once the queue ahead has shrunk that much."""
        seconds = max(MIN_RETRY_S, over)
        message = busy_message(self.late.format(within=within), seconds)
        return Overloaded(message, seconds, NO_CAPACITY)

    def _shed(self) -> list[tuple[_Request[K, T], Overloaded]]:
        """Take out of the queue the requests the batches, as now measured, would answer
        after their callers stopped waiting, and their refusals (under the condition's
        lock)."""
        now, ahead = time.monotonic(), 0
        kept: deque[_Request[K, T]] = deque()
        late: list[tuple[_Request[K, T], Overloaded]] = []
        for request in self._queue:
            over = now + self.cost.seconds(ahead + len(request.ids)) - request.due
            if over > 0 and kept and request.deadline is not None:
                late.append((request, self._too_late(request.deadline, over)))
            else:
                kept.append(request)
                ahead += len(request.ids)
        if late:
            self._queue, self._queued_ids = kept, ahead
            self.refused += len(late)
        return late

    def _wait_s(self, ids: int) -> float:
        """The rest of the running batch, then the queued ids and `ids` more."""
        left = 0.0
        if self._running is not None:
            running, started = self._running
            left = max(0.0, self.cost.seconds(running) - (time.monotonic() - started))
        return left + self.cost.seconds(self._queued_ids + ids)

    def close(self, reason: BaseException) -> None:
        """Fail every queued request (and every later one) with `reason`; the batch that
        runs now still finishes."""
        with self._cond:
            if self._closed is None:
                self._closed = reason
            pending, self._queue, self._queued_ids = list(self._queue), deque(), 0
            self._cond.notify_all()
        for request in pending:
            request.error = reason
            request.done.release()

    def _loop(self) -> None:
        while True:
            batch = self._next()
            if batch is None:
                return
            unique = list(dict.fromkeys(i for r in batch for i in r.ids))
            started = time.monotonic()
            with self._cond:
                self._running, self._discount_s = (len(unique), started), 0.0
            try:
                results, error = self._run(unique), None
            except Exception as exc:  # noqa: BLE001 - handed to every request of the batch
                results, error = {}, exc
            late: list[tuple[_Request[K, T], Overloaded]] = []
            with self._cond:
                self._running = None
                if error is None:  # a failed batch's time says nothing of the next one's
                    self.cost.add(len(unique), time.monotonic() - started - self._discount_s)
                    late = self._shed()
            for request, refusal in late:
                request.error = refusal
                request.done.release()
            self.batches += 1
            for request in batch:
                request.error = error
                request.results = {i: results[i] for i in request.ids} if error is None else None
                self.requests += 1
                request.done.release()

    def _next(self) -> list[_Request[K, T]] | None:
        """The next micro-batch (at least one request), or None once closed."""
        with self._cond:
            while not self._queue and self._closed is None:
                self._cond.wait()
            if self._closed is not None:
                return None
            until = time.monotonic() + self.delay_s
            while self._queued_ids < self.max_ids and self._closed is None:
                left = until - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            batch: list[_Request[K, T]] = []
            total = 0
            while self._queue and (not batch or total + len(self._queue[0].ids) <= self.max_ids):
                request = self._queue.popleft()
                total += len(request.ids)
                batch.append(request)
            self._queued_ids -= total
            return batch or None
