"""Client streams on a thread-pool server: how many one caller holds, how long they wait.

A thread-pool server gives a call a thread from its start to its end, and a client
stream that sends nothing, or its first message and then nothing, holds that thread until
its deadline, which the client chooses. A plane (`rpc.planes`) can bound both:

- `CallerSlots`: at most `per_caller` calls at once per caller, named by its
  certificate's identity (`caller_of`: on an insecure server, its connection); one more
  is refused at once, so one certificate cannot take every thread of a plane.
- `StreamWatch`: one thread that cancels a call whose next request message does not come
  within its timeout (`watched`), so a stalled stream gives its thread back. The handler
  then reads `Stalled` instead of the next message; the client sees CANCELLED.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
from vfl.rpc.identity import caller_party
from vfl.secure.pki.certs import CertError

log = logging.getLogger(__name__)

MAX_TICK_S = 0.25  # how often the watch looks at its streams, at most


class Stalled(Exception):
    """A client stream sent no message within its timeout; its call was cancelled."""


def caller_of(context: grpc.ServicerContext) -> str:
    """Who is calling: the identity its certificate names, else (an insecure server, or a
    certificate that names none) its address, e.g. "ipv4:127.0.0.1:50312" (without TLS
    nothing tells one process from another but its connection)."""
    try:
        party = caller_party(context)
    except CertError:
        party = None
    return party if party is not None else context.peer()


class CallerSlots:
    """Counts the calls each caller holds, up to `per_caller` at once; thread-safe."""

    def __init__(self, per_caller: int) -> None:
        self.per_caller = per_caller
        self._lock = threading.Lock()
        self._held: dict[str, int] = {}

    def take(self, caller: str) -> bool:
        """Count one more call of `caller`; False (nothing counted) if it holds
        `per_caller` already."""
        with self._lock:
            held = self._held.get(caller, 0)
            if held >= self.per_caller:
                return False
            self._held[caller] = held + 1
            return True

    def give(self, caller: str) -> None:
        """One call of `caller` ended."""
        with self._lock:
            held = self._held.pop(caller, 0) - 1
            if held > 0:
                self._held[caller] = held

    def held(self, caller: str) -> int:
        with self._lock:
            return self._held.get(caller, 0)


class _Watched:
    """A request iterator whose every message must come within `timeout_s`."""

    def __init__(
        self,
        watch: StreamWatch,
        requests: Iterator[Any],
        context: grpc.ServicerContext,
        caller: str,
        timeout_s: float,
    ) -> None:
        self._watch, self._requests, self.context = watch, requests, context
        self.caller, self.timeout_s = caller, timeout_s
        self.stalled = False  # set by the watch when it cancelled the call

    def __iter__(self) -> _Watched:
        return self

    def __next__(self) -> Any:
        self._watch.arm(self)
        try:
            return next(self._requests)
        except (StopIteration, grpc.RpcError):
            if self.stalled:
                raise Stalled(
                    f"'{self.caller}' sent nothing for {self.timeout_s:g} s; its call was cancelled"
                ) from None
            raise
        finally:
            self._watch.disarm(self)


class StreamWatch:
    """Cancels the calls whose request stream waits too long for its next message.

    Args:
        on_stalled: hears the caller of each call it cancelled.
    """

    def __init__(self, on_stalled: Callable[[str], None] | None = None) -> None:
        self._on_stalled = on_stalled
        self._cond = threading.Condition()
        self._armed: dict[_Watched, float] = {}  # stream -> when it is due
        self._thread: threading.Thread | None = None
        self._closed = False

    def watched(
        self,
        requests: Iterator[Any],
        context: grpc.ServicerContext,
        caller: str,
        timeout_s: float,
    ) -> Iterator[Any]:
        """`requests`, each of whose messages must come within `timeout_s` seconds of
        being asked for; past that the call is cancelled and the iterator raises
        `Stalled`."""
        return _Watched(self, requests, context, caller, timeout_s)

    def arm(self, stream: _Watched) -> None:
        """`stream` waits for its next message from now on."""
        with self._cond:
            if self._closed:
                return
            idle = not self._armed  # the watch waits for a stream to watch: wake it
            self._armed[stream] = time.monotonic() + stream.timeout_s
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="rpc-stream-watch", daemon=True
                )
                self._thread.start()
            if idle:
                self._cond.notify()

    def disarm(self, stream: _Watched) -> None:
        """`stream` got its message (or ended)."""
        with self._cond:
            self._armed.pop(stream, None)

    def close(self) -> None:
        """Stop watching (the streams still armed are left to their deadlines)."""
        with self._cond:
            self._closed = True
            self._armed.clear()
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout=2 * MAX_TICK_S)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._armed and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                now = time.monotonic()
                due = [s for s, at in self._armed.items() if at <= now]
                for stream in due:
                    del self._armed[stream]
                    stream.stalled = True
                tick = min([MAX_TICK_S, *(s.timeout_s / 4 for s in self._armed)])
            for stream in due:
                self._cancel(stream)
            if not due:
                with self._cond:
                    self._cond.wait(tick)

    def _cancel(self, stream: _Watched) -> None:
        log.debug(  # the handler, woken with `Stalled`, tells it in its own words
            "cancelled a call of '%s': its request stream sent nothing for %g s",
            stream.caller,
            stream.timeout_s,
        )
        stream.context.cancel()
        if self._on_stalled is not None:
            self._on_stalled(stream.caller)
