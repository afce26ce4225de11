"""Planes of a thread-pool server, over a real gRPC server on a loopback port: an
admitting plane refuses calls beyond its threads at once (RESOURCE_EXHAUSTED with a retry
hint) while the other planes keep serving, a call that waits for another call of the
same server never deadlocks, as it did on one shared pool, and a warm plane starts all
its threads at its first call."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from vfl.rpc import Plane, PlaneRouter, bind, dial, make_server, retry_after_s
from vfl.rpc.planes import HandlerCache

SERVICE = "t.Test"
WAIT, ANSWER = f"/{SERVICE}/Wait", f"/{SERVICE}/Answer"  # as Predict and Push


def identity(raw: bytes) -> bytes:
    return raw


class Server:
    """`Wait` holds its call until `release` (or, with `ask`, calls `Answer` on this same
    server first); `Answer` answers at once. `Wait` runs on an admitting plane of `threads`,
    `Answer` on a plane of one thread."""

    def __init__(self, threads: int, ask: bool = False, warm: bool = False) -> None:
        self.release, self.ask = threading.Event(), ask
        self.refusals: list[str] = []  # what the router told of each refusal
        waits = Plane(
            "waits", frozenset({WAIT}), threads, admit=True, busy="the test is busy", warm=warm
        )
        self.router = PlaneRouter(
            [Plane("answers", frozenset({ANSWER}), 1), waits],
            self.refusals.append,
        )
        self.server = make_server(1, self.router)
        unary = grpc.unary_unary_rpc_method_handler
        handlers = {
            "Wait": unary(self._wait, identity, identity),
            "Answer": unary(lambda request, context: b"answer", identity, identity),
        }
        generic = grpc.method_handlers_generic_handler(SERVICE, handlers)
        self.server.add_generic_rpc_handlers((generic,))
        self.address = f"127.0.0.1:{bind(self.server, '127.0.0.1:0')}"
        self.server.start()

    def _wait(self, request: bytes, context) -> bytes:
        if self.ask:  # like a Predict whose answer comes as a Push to this same server
            with dial(self.address) as channel:
                return channel.unary_unary(ANSWER)(b"q", timeout=10)
        self.release.wait(10)
        return b"waited"

    def stop(self) -> None:
        self.release.set()
        self.server.stop(0).wait()
        self.router.close()


@pytest.fixture
def server():
    made = []

    def make(threads: int, ask: bool = False, warm: bool = False) -> Server:
        made.append(Server(threads, ask, warm))
        return made[-1]

    yield make
    for s in made:
        s.stop()


def test_calls_beyond_an_admitting_plane_are_refused_at_once_and_other_planes_serve(
    server,
) -> None:
    # Prepare: two calls hold the plane's two threads
    srv = server(threads=2)
    with dial(srv.address) as channel, ThreadPoolExecutor(8) as pool:
        wait, answer = channel.unary_unary(WAIT), channel.unary_unary(ANSWER)
        held = [pool.submit(wait, b"", timeout=20) for _ in range(2)]
        time.sleep(0.3)
        # Execute
        begun = time.monotonic()
        refusals = []
        for _ in range(5):
            with pytest.raises(grpc.RpcError) as err:
                wait(b"", timeout=20)
            refusals.append(err.value)
        refused_in = time.monotonic() - begun
        other = answer(b"", timeout=5)
        srv.release.set()
        results = [f.result(timeout=10) for f in held]
    # Assert
    assert refused_in < 2.0, refused_in
    for exc in refusals:
        assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert exc.details().startswith("the test is busy; retry in ")
        assert retry_after_s(exc) is not None and retry_after_s(exc) > 0
    assert other == b"answer" and results == [b"waited", b"waited"]
    assert srv.router.pools["waits"].refused == 5 and srv.router.pools["waits"].held == 0
    assert srv.refusals == ["waits"] * 5


def test_a_call_that_needs_another_call_of_its_server_never_deadlocks(server) -> None:
    # Prepare: as many waiting calls as their plane has threads, each needing an answer
    srv = server(threads=4, ask=True)
    with dial(srv.address) as channel, ThreadPoolExecutor(4) as pool:
        wait = channel.unary_unary(WAIT)
        # Execute
        begun = time.monotonic()
        calls = [pool.submit(wait, b"", timeout=10) for _ in range(4)]
        results = [f.result(timeout=15) for f in calls]
    # Assert
    assert results == [b"answer"] * 4 and time.monotonic() - begun < 5


def plane_threads(name: str) -> int:
    return sum(t.name.startswith(f"rpc-{name}_") for t in threading.enumerate())


def test_a_warm_plane_starts_every_thread_at_its_first_call_and_serves_meanwhile(
    server,
) -> None:
    # Prepare: the planes of the file's earlier servers have ended (they stop without
    # waiting for their threads); a warm plane of 64 threads, none started yet
    deadline = time.monotonic() + 20
    while plane_threads("waits") and time.monotonic() < deadline:
        time.sleep(0.05)
    srv = server(threads=64, warm=True)
    srv.release.set()
    assert plane_threads("waits") == 0
    # Execute: one call
    with dial(srv.address) as channel:
        first = channel.unary_unary(WAIT)(b"", timeout=10)
        deadline = time.monotonic() + 20
        while plane_threads("waits") < 64 and time.monotonic() < deadline:
            time.sleep(0.05)
        later = [channel.unary_unary(WAIT)(b"", timeout=10) for _ in range(3)]
    # Assert: every thread runs, no more, and calls are served as before
    assert plane_threads("waits") == 64
    assert first == b"waited" and later == [b"waited"] * 3


def test_a_handler_made_from_another_is_made_once_until_that_one_changes() -> None:
    cache, made = HandlerCache(), []

    def make(source: str):
        def build():
            made.append(source)
            return f"wrapped {source}"

        return build

    one, two = object(), object()  # two handlers of the same method
    assert cache.get("m", one, make("one")) == "wrapped one"
    assert cache.get("m", one, make("one")) == "wrapped one"
    assert cache.get("m", two, make("two")) == "wrapped two"  # the method's handler changed
    assert cache.get("n", one, make("one")) == "wrapped one"  # another key
    assert made == ["one", "two", "one"]
