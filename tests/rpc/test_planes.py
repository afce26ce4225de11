"""Planes of a thread-pool server, over a real gRPC server on a loopback port: an
admitting plane refuses calls beyond its threads at once (RESOURCE_EXHAUSTED with a retry
hint) while the other planes keep serving, and a call that waits for another call of the
same server never deadlocks, as it did on one shared pool."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from vfl.rpc import Plane, PlaneRouter, bind, dial, make_server, retry_after_s

SERVICE = "t.Test"
WAIT, ANSWER = f"/{SERVICE}/Wait", f"/{SERVICE}/Answer"  # as Predict and Push


def identity(raw: bytes) -> bytes:
    return raw


class Server:
    """`Wait` holds its call until `release` (or, with `ask`, calls `Answer` on this same
    server first); `Answer` answers at once. `Wait` runs on an admitting plane of `threads`,
    `Answer` on a plane of one thread."""

    def __init__(self, threads: int, ask: bool = False) -> None:
        self.release, self.ask = threading.Event(), ask
        self.refusals: list[str] = []  # what the router told of each refusal
        self.router = PlaneRouter(
            [
                Plane("answers", frozenset({ANSWER}), 1),
                Plane("waits", frozenset({WAIT}), threads, admit=True, busy="the test is busy"),
            ],
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

    def make(threads: int, ask: bool = False) -> Server:
        made.append(Server(threads, ask))
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
