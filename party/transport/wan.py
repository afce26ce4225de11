"""A WAN profile for the data plane: every envelope pays serialisation time and latency.

`ShapedChannel` wraps any `Channel` with a `vfl.contract.spec.NetworkSpec` (a job's
`network:` or the flags of `vfl party serve`). Each direction (sender -> receiver) is a link with
`bandwidth_mbps`: an envelope occupies the link for `size * 8 / bandwidth` seconds after
the previous one leaves, then arrives `rtt_ms / 2` later. `send` returns once the envelope
has left (like a socket whose buffer drained), and a per-link worker delivers it at its
arrival time, so back-to-back sends pipeline as on a real link.
"""

from __future__ import annotations

import contextvars
import heapq
import itertools
import threading
import time
from collections.abc import Callable

from vfl.contract.spec import NetworkSpec
from vfl.secure.channel import Channel, Payload
from vfl.secure.errors import ChannelError


class _Link:
    """One direction of a shaped link: a departure clock and a delivery worker."""

    def __init__(self, profile: NetworkSpec) -> None:
        self._profile = profile
        self._free_at = 0.0
        self._lock = threading.Lock()
        self._cond = threading.Condition()
        self._queue: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._error: Exception | None = None
        self._closed = False
        self._in_flight = 0
        context = contextvars.copy_context()  # its log lines name the job
        self._worker = threading.Thread(target=context.run, args=(self._deliver,), daemon=True)
        self._worker.start()

    def send(self, size: int, deliver: Callable[[], None]) -> None:
        if self._error is not None:
            raise ChannelError(f"an earlier envelope on this link failed: {self._error}")
        with self._lock:
            now = time.monotonic()
            depart = max(now, self._free_at) + self._profile.serialisation_s(size)
            self._free_at = depart
        arrive = depart + self._profile.rtt_ms / 2000.0
        with self._cond:
            heapq.heappush(self._queue, (arrive, next(self._seq), deliver))
            self._in_flight += 1
            self._cond.notify_all()
        time.sleep(max(0.0, depart - time.monotonic()))

    def _deliver(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if self._closed and not self._queue:
                    return
                arrive, _, deliver = self._queue[0]
                wait = arrive - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                heapq.heappop(self._queue)
            try:
                deliver()
            except Exception as exc:  # noqa: BLE001 - surfaced on the next send or flush
                self._error = exc
            with self._cond:
                self._in_flight -= 1
                self._cond.notify_all()

    def flush(self, timeout: float) -> None:
        """Wait until every envelope sent so far has been delivered.

        Raises:
            ChannelError: a delivery failed, or the link did not drain within `timeout`.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._in_flight and time.monotonic() < deadline:
                self._cond.wait(deadline - time.monotonic())
            if self._in_flight:
                raise ChannelError(
                    f"{self._in_flight} envelope(s) still in flight after {timeout:.0f} s"
                )
        if self._error is not None:
            raise ChannelError(f"an envelope on this link failed: {self._error}")

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()


class ShapedChannel:
    """A `Channel` whose sends cross an emulated WAN link per peer."""

    def __init__(self, inner: Channel, profile: NetworkSpec) -> None:
        self._inner = inner
        self._profile = profile
        self._links: dict[str, _Link] = {}
        self._lock = threading.Lock()
        self._closed = False
        self.party_id = inner.party_id
        self.stats = inner.stats

    def _link(self, peer: str) -> _Link:
        with self._lock:
            if peer not in self._links:
                self._links[peer] = _Link(self._profile)
            return self._links[peer]

    def send(self, peer: str, tag: str, payload: Payload) -> None:
        size = payload.ByteSize()
        self._link(peer).send(size, lambda: self._inner.send(peer, tag, payload))

    def recv(self, peer: str, tag: str, timeout: float | None = None) -> Payload:
        return self._inner.recv(peer, tag, timeout)

    def flush(self, timeout: float = 300.0) -> None:
        """Block until all sent envelopes arrived (call before a job's mailbox closes)."""
        with self._lock:
            links = list(self._links.values())
        for link in links:
            link.flush(timeout)

    def close(self, timeout: float = 300.0) -> None:
        """Deliver every envelope still in flight (`flush`), then stop the links; the
        second call does nothing.

        Raises:
            ChannelError: a delivery failed, or a link did not drain within `timeout`.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self.flush(timeout)
        finally:
            with self._lock:
                for link in self._links.values():
                    link.close()
