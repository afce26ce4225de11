"""Micro-batching of concurrent online scoring requests for one model.

Requests queue; one worker thread takes the queued ones as a micro-batch once it holds
`max_ids` ids or `delay_s` after the oldest request arrived, whichever comes first, and
runs them as one call. While a batch runs, new requests queue, so under load batches
fill up and a lone request waits at most `delay_s` (docs/architecture.md, "Online
scoring": 64 ids, 2 ms). At most `max_queued` requests wait for a batch: one more is
refused at once (`Overloaded`, with a retry hint of the batches ahead of it), never
queued until its deadline.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from vfl.party.errors import Overloaded
from vfl.rpc.planes import MIN_RETRY_S, busy_message

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)

MAX_IDS = 64
DELAY_S = 0.002
MAX_QUEUED = 32  # requests waiting for a batch, by default


@dataclass
class _Request(Generic[K, T]):
    ids: list[K]
    done: threading.Event = field(default_factory=threading.Event)
    results: dict[K, T] | None = None
    error: BaseException | None = None


class MicroBatcher(Generic[K, T]):
    """Runs `run(unique ids)` (which returns one result per id) for batches of requests.

    Args:
        run: scores a micro-batch; what it raises, every request of the batch raises.
        name: the worker thread's name.
        max_queued: requests that may wait for a batch; one more is refused.
        busy: what a refusal says, before "; retry in N s".
    """

    def __init__(
        self,
        run: Callable[[list[K]], dict[K, T]],
        name: str,
        max_ids: int = MAX_IDS,
        delay_s: float = DELAY_S,
        max_queued: int = MAX_QUEUED,
        busy: str = "the queue is full",
    ) -> None:
        self._run, self.max_ids, self.delay_s = run, max_ids, delay_s
        self.max_queued, self.busy = max_queued, busy
        self.refused = 0  # requests refused with a full queue
        self._batch_s = MIN_RETRY_S  # moving mean of a batch's duration
        self._cond = threading.Condition()
        self._queue: list[_Request[K, T]] = []
        self._closed: BaseException | None = None
        self.batches = 0  # micro-batches run
        self.requests = 0  # requests answered
        self._worker = threading.Thread(target=self._loop, name=name, daemon=True)
        self._worker.start()

    def submit(self, ids: list[K], timeout: float) -> dict[K, T]:
        """Queue `ids` and wait for their results.

        Raises:
            Overloaded: `max_queued` requests wait already (at once, with a retry hint).
            TimeoutError: no answer within `timeout` seconds.
            Whatever `run` raised for the batch, or the reason the batcher was closed.
        """
        request: _Request[K, T] = _Request(list(ids))
        with self._cond:
            if self._closed is not None:
                raise self._closed
            if len(self._queue) >= self.max_queued:
                self.refused += 1
                # the batches ahead: the one running, and those the queue fills
                ahead = 1 + -(-self._count() // self.max_ids)
                seconds = max(MIN_RETRY_S, ahead * self._batch_s)
                raise Overloaded(busy_message(self.busy, seconds), seconds)
            self._queue.append(request)
            self._cond.notify_all()
        if not request.done.wait(timeout):
            raise TimeoutError(f"no answer within {timeout:.0f} s")
        if request.error is not None:
            raise request.error
        assert request.results is not None
        return request.results

    def close(self, reason: BaseException) -> None:
        """Fail every queued request (and every later one) with `reason`; the batch that
        runs now still finishes."""
        with self._cond:
            if self._closed is None:
                self._closed = reason
            pending, self._queue = self._queue, []
            self._cond.notify_all()
        for request in pending:
            request.error = reason
            request.done.set()

    def _loop(self) -> None:
        while True:
            batch = self._next()
            if batch is None:
                return
            unique = list(dict.fromkeys(i for r in batch for i in r.ids))
            started = time.monotonic()
            try:
                results, error = self._run(unique), None
            except Exception as exc:  # noqa: BLE001 - handed to every request of the batch
                results, error = {}, exc
            with self._cond:
                self._batch_s = 0.8 * self._batch_s + 0.2 * (time.monotonic() - started)
            self.batches += 1
            for request in batch:
                request.error = error
                request.results = {i: results[i] for i in request.ids} if error is None else None
                self.requests += 1
                request.done.set()

    def _next(self) -> list[_Request[K, T]] | None:
        """The next micro-batch (at least one request), or None once closed."""
        with self._cond:
            while not self._queue and self._closed is None:
                self._cond.wait()
            if self._closed is not None:
                return None
            until = time.monotonic() + self.delay_s
            while self._count() < self.max_ids and self._closed is None:
                left = until - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            batch: list[_Request[K, T]] = []
            total = 0
            while self._queue and (not batch or total + len(self._queue[0].ids) <= self.max_ids):
                total += len(self._queue[0].ids)
                batch.append(self._queue.pop(0))
            return batch or None

    def _count(self) -> int:
        return sum(len(r.ids) for r in self._queue)
