"""Planes of a thread-pool server: each kind of call on threads of its own, admission
where a call may be refused.

A sync gRPC server runs every call on one thread pool, so a call that waits (an online
`Predict` waiting for its micro-batch) holds a thread that another kind of call (a
training job's `Push`) may need. `PlaneRouter` gives each `Plane` (a set of methods,
optionally only calls carrying one metadata pair) a pool of its own; every other call
stays on the server's pool. A plane with `admit` counts its calls from admission to
their end: a call beyond its threads is refused at once with RESOURCE_EXHAUSTED and a
retry hint (`RETRY_AFTER_KEY` in the trailing metadata, the seconds in the message),
answered from a small pool of its own, so it never waits for a thread of any plane.
Planes without `admit` queue their calls for their own threads, as the server's pool does.
A plane with `per_caller` also bounds the calls one caller (its certificate's identity)
holds at once, refusing one more the same way as it starts on its thread (in
microseconds: the caller is known only there), and one with `message_timeout_s` cancels a
call whose request stream waits longer than that for its next message (`rpc.streams`), so
no single certificate can keep a plane's threads with streams that send nothing.
A plane with `warm` starts all its threads at its first call, in the background: a burst
then finds them waiting instead of starting one thread per call in the server's polling
thread (about a millisecond each on a busy machine, which a thousand calls queue behind).

The routing happens in the server's polling thread (a gRPC server interceptor), using
grpc's per-method pool (`experimental_thread_pool` on a handler's behaviour); the
interceptor must come first in the server's list so that it wraps the others' handlers.
A method's handler on a plane's pool is made once (`HandlerCache`), not at every call:
the polling thread takes every call in turn, so its work per call bounds a burst.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import grpc
from vfl.rpc.streams import CallerSlots, StreamWatch, caller_of

RETRY_AFTER_KEY = "vfl-retry-after-ms"  # trailing metadata of a refusal: when to retry
PLANE_KEY = "vfl-plane"  # request metadata a client may route a call by (`Plane.metadata`)
MIN_RETRY_S = 0.05  # the shortest retry hint
_REFUSAL_THREADS = 2  # refusals take microseconds each
_WARM_HOLD_S = 30.0  # the most a thread being started waits for its siblings


@dataclass(frozen=True)
class Plane:
    """Calls served on threads of their own.

    Args:
        name: names the pool's threads (`rpc-<name>`).
        methods: full method names ("/vfl.v1.PartyService/Push").
        threads: the pool's size; with `admit`, also the most calls held at once.
        admit: refuse a call beyond `threads` (RESOURCE_EXHAUSTED, at once) instead of
            queueing it for a thread.
        metadata: only calls carrying this (key, value) pair belong here.
        busy: what a refusal says, before "; retry in N s".
        per_caller: the most calls one caller holds at once (until its handler returns);
            one more is refused with RESOURCE_EXHAUSTED and a retry hint.
        caller_busy: what such a refusal says; "{caller}" stands for the caller.
        message_timeout_s: the longest a request stream may wait for its next message
            before its call is cancelled.
        warm: start every thread at the plane's first call (in the background), not
            one per call as calls come.
    """

    name: str
    methods: frozenset[str]
    threads: int
    admit: bool = False
    metadata: tuple[str, str] | None = None
    busy: str = "the server is at capacity"
    per_caller: int | None = None
    caller_busy: str = "'{caller}' holds as many calls here as one caller may"
    message_timeout_s: float | None = None
    warm: bool = False

    def holds(self, details: grpc.HandlerCallDetails) -> bool:
        if details.method not in self.methods:
            return False
        return self.metadata is None or self.metadata in tuple(details.invocation_metadata or ())


class PlanePool(ThreadPoolExecutor):
    """A plane's threads. With admission, it counts its calls from `admit` to their end
    and keeps their mean duration (the retry hint); with `warm`, its first call starts
    every thread (`warm_up`)."""

    def __init__(self, plane: Plane) -> None:
        super().__init__(plane.threads, thread_name_prefix=f"rpc-{plane.name}")
        self.plane = plane
        self._lock = threading.Lock()
        self.held = 0  # calls admitted and not ended
        self.refused = 0  # calls refused
        self._mean_s = MIN_RETRY_S  # moving mean of a call's duration
        self._warming: threading.Thread | None = None

    def admit(self) -> bool:
        """Count one more call if the plane holds fewer than its threads; False if not."""
        with self._lock:
            if self.held >= self.plane.threads:
                self.refused += 1
                return False
            self.held += 1
            return True

    def retry_after_s(self) -> float:
        """When a refused call may find a free thread: about one call's duration."""
        with self._lock:
            return max(MIN_RETRY_S, self._mean_s)

    def warm_up(self) -> None:
        """Start every thread of the pool: the calls meanwhile keep theirs, and each new
        thread holds a placeholder task until the last one started (else a thread whose
        task ended would take the next one instead of a new thread starting)."""
        gate = threading.Event()
        try:
            for _ in range(self.plane.threads):
                super().submit(gate.wait, _WARM_HOLD_S)
        except RuntimeError:  # shut down meanwhile
            pass
        finally:
            gate.set()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        if self.plane.warm and self._warming is None:
            with self._lock:
                if self._warming is None:
                    name = f"rpc-{self.plane.name}-warm"
                    self._warming = threading.Thread(target=self.warm_up, name=name, daemon=True)
                    self._warming.start()
        admitted = time.monotonic()

        def run() -> Any:
            try:
                return fn(*args, **kwargs)
            finally:
                self._ended(time.monotonic() - admitted)

        return super().submit(run)

    def _ended(self, seconds: float) -> None:
        with self._lock:
            if self.plane.admit:
                self.held -= 1
            self._mean_s = 0.8 * self._mean_s + 0.2 * seconds


_HANDLERS = {
    (False, False): grpc.unary_unary_rpc_method_handler,
    (False, True): grpc.unary_stream_rpc_method_handler,
    (True, False): grpc.stream_unary_rpc_method_handler,
    (True, True): grpc.stream_stream_rpc_method_handler,
}


class HandlerCache:
    """Handlers an interceptor made from others, made once per key (a method; a method
    and a plane), and made again when the handler they were made from changes."""

    def __init__(self) -> None:
        self._made: dict[Any, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    def get(
        self, key: Any, source: grpc.RpcMethodHandler, make: Callable[[], grpc.RpcMethodHandler]
    ) -> grpc.RpcMethodHandler:
        made = self._made.get(key)
        if made is None or made[0] is not source:
            made = self._made[key] = (source, make())  # a race makes it twice: both work
        return made[1]


def _behavior(handler: grpc.RpcMethodHandler) -> Callable[..., Any]:
    return (
        handler.unary_unary or handler.unary_stream or handler.stream_unary or handler.stream_stream
    )


def _kind(handler: grpc.RpcMethodHandler) -> tuple[bool, bool]:
    return bool(handler.request_streaming), bool(handler.response_streaming)


def _on_pool(handler: grpc.RpcMethodHandler, pool: ThreadPoolExecutor) -> grpc.RpcMethodHandler:
    """`handler`, run on `pool`'s threads."""
    return _with_behavior(handler, _behavior(handler), pool)


def _with_behavior(
    handler: grpc.RpcMethodHandler, behavior: Callable[..., Any], pool: ThreadPoolExecutor
) -> grpc.RpcMethodHandler:
    """`handler` with `behavior` in place of its own, run on `pool`'s threads."""

    def run(request: Any, context: grpc.ServicerContext) -> Any:
        return behavior(request, context)

    setattr(run, "experimental_thread_pool", pool)  # noqa: B010 - grpc reads it so
    make = _HANDLERS[_kind(handler)]
    return make(run, handler.request_deserializer, handler.response_serializer)


def retry_metadata(seconds: float) -> tuple[tuple[str, str], ...]:
    """The trailing metadata of a refusal that may be retried after `seconds`."""
    return ((RETRY_AFTER_KEY, str(max(1, round(seconds * 1000)))),)


def retry_after_s(exc: grpc.RpcError) -> float | None:
    """The retry hint of a refused call (RESOURCE_EXHAUSTED with `RETRY_AFTER_KEY`), in
    seconds; None if it has none."""
    if exc.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
        return None
    trailing = getattr(exc, "trailing_metadata", None)
    for key, value in (trailing() if callable(trailing) else None) or ():
        if key == RETRY_AFTER_KEY:
            try:
                return int(value) / 1000
            except ValueError:
                return None
    return None


def busy_message(busy: str, seconds: float) -> str:
    """The message of a refusal: what is at capacity, and when to retry."""
    return f"{busy}; retry in {seconds:.2g} s"


def _refusal(
    handler: grpc.RpcMethodHandler, message: str, seconds: float, pool: ThreadPoolExecutor
) -> grpc.RpcMethodHandler:
    """A handler that answers RESOURCE_EXHAUSTED with `message` and the retry hint, on
    `pool`, without reading the request."""

    def refuse(request: Any, context: grpc.ServicerContext) -> Any:
        context.set_trailing_metadata(retry_metadata(seconds))
        context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, message)

    setattr(refuse, "experimental_thread_pool", pool)  # noqa: B010 - grpc reads it so
    make = _HANDLERS[_kind(handler)]
    return make(refuse, _unread, handler.response_serializer)


def _unread(raw: bytes) -> bytes:
    """A refused request's bytes, left unparsed (gRPC takes None for a failed parse)."""
    return raw


class PlaneRouter(grpc.ServerInterceptor):
    """Runs each plane's calls on its own pool (the first plane that holds a call), and
    refuses those of an admitting plane beyond its threads, and those of a caller beyond
    its `per_caller`; every other call stays on the server's pool. `close` ends the pools'
    threads and the stream watch (after the server stopped)."""

    def __init__(
        self, planes: Sequence[Plane], on_refused: Callable[[str], None] | None = None
    ) -> None:
        """`on_refused(where)` hears of each refusal: the plane's name, or "<name> per
        caller" (the daemon's metrics count them), and of each stalled stream cancelled
        ("stalled stream")."""
        self.planes = tuple(planes)
        self.pools = {p.name: PlanePool(p) for p in self.planes}
        self.slots = {p.name: CallerSlots(p.per_caller) for p in self.planes if p.per_caller}
        self._on_refused = on_refused
        self._refusals = ThreadPoolExecutor(_REFUSAL_THREADS, thread_name_prefix="rpc-refuse")
        self.watch = StreamWatch(lambda caller: self._refused("stalled stream"))
        self._routed = HandlerCache()  # (method, plane) -> the handler on its pool

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        plane = next((p for p in self.planes if p.holds(handler_call_details)), None)
        if plane is None or handler is None:
            return handler
        pool = self.pools[plane.name]
        if plane.admit and not pool.admit():
            self._refused(plane.name)
            seconds = pool.retry_after_s()
            return _refusal(handler, busy_message(plane.busy, seconds), seconds, self._refusals)
        key = (handler_call_details.method, plane.name)
        if plane.per_caller is None and plane.message_timeout_s is None:
            return self._routed.get(key, handler, lambda: _on_pool(handler, pool))
        return self._routed.get(
            key,
            handler,
            lambda: _with_behavior(
                handler, self._bounded(plane, _behavior(handler), handler), pool
            ),
        )

    def _bounded(
        self, plane: Plane, inner: Callable[..., Any], handler: grpc.RpcMethodHandler
    ) -> Callable[..., Any]:
        """`inner`, refused beyond the plane's calls per caller, its request stream (if
        it has one) watched for stalls."""
        slots, pool = self.slots.get(plane.name), self.pools[plane.name]
        timeout = plane.message_timeout_s if handler.request_streaming else None

        def bounded(request: Any, context: grpc.ServicerContext) -> Any:
            caller = caller_of(context)
            if slots is not None and not slots.take(caller):
                self._refused(f"{plane.name} per caller")
                seconds = pool.retry_after_s()
                context.set_trailing_metadata(retry_metadata(seconds))
                busy = plane.caller_busy.replace("{caller}", caller)
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, busy_message(busy, seconds))
            try:
                if timeout is not None:
                    request = self.watch.watched(request, context, caller, timeout)
                return inner(request, context)
            finally:
                if slots is not None:
                    slots.give(caller)

        return bounded

    def _refused(self, where: str) -> None:
        if self._on_refused is not None:
            self._on_refused(where)

    def close(self) -> None:
        self.watch.close()
        for pool in (*self.pools.values(), self._refusals):
            pool.shutdown(wait=False, cancel_futures=True)
