"""Client streams on a plane, over a real gRPC server on a loopback port: one caller holds
at most `per_caller` calls at once (one more is refused at once with a retry hint), and a
stream that stalls before or between its messages is cancelled after
`message_timeout_s`, giving its thread back, while a stream that keeps sending is read to
its end."""

from __future__ import annotations

import threading
import time

import grpc
import pytest
from vfl.rpc import Plane, PlaneRouter, Stalled, bind, dial, make_server, retry_after_s

SERVICE = "t.Test"
TAKE = f"/{SERVICE}/Take"  # a client stream, as Push
TIMEOUT_S = 0.5


def identity(raw: bytes) -> bytes:
    return raw


class Server:
    """`Take` reads its stream to the end and answers the number of messages; it runs on
    a plane of 4 threads, 2 calls per caller, `TIMEOUT_S` between messages."""

    def __init__(self) -> None:
        self.ended: list[str] = []  # how each call's reading ended
        self.refusals: list[str] = []
        plane = Plane(
            "takes",
            frozenset({TAKE}),
            4,
            per_caller=2,
            caller_busy="'{caller}' holds 2 takes",
            message_timeout_s=TIMEOUT_S,
        )
        self.router = PlaneRouter([plane], self.refusals.append)
        self.server = make_server(1, self.router)
        handlers = {"Take": grpc.stream_unary_rpc_method_handler(self._take, identity, identity)}
        self.server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE, handlers),)
        )
        self.address = f"127.0.0.1:{bind(self.server, '127.0.0.1:0')}"
        self.server.start()

    def _take(self, requests, context) -> bytes:
        try:
            count = sum(1 for _ in requests)
        except Stalled:
            self.ended.append("stalled")
            raise
        self.ended.append("read")
        return str(count).encode()

    def stop(self) -> None:
        self.server.stop(0).wait()
        self.router.close()


@pytest.fixture
def server():
    srv = Server()
    yield srv
    srv.stop()


def test_stalled_streams_are_cancelled_and_one_caller_holds_at_most_its_share(server) -> None:
    # Prepare: streams that send nothing, or one message and then nothing
    stop = threading.Event()

    def silent():
        stop.wait(20)
        yield from ()

    def one_then_silent():
        yield b"head"
        stop.wait(20)

    def steady():  # a message every TIMEOUT_S / 2: slow, never stalled
        for _ in range(6):
            time.sleep(TIMEOUT_S / 2)
            yield b"chunk"

    with dial(server.address) as channel:
        take = channel.stream_unary(TAKE)
        try:
            # Execute
            begun = time.monotonic()
            stalled = [
                take.future(silent(), timeout=20),
                take.future(one_then_silent(), timeout=20),
            ]
            time.sleep(0.2)
            with pytest.raises(grpc.RpcError) as refused:
                take(silent(), timeout=20)  # a third of the same caller
            refused_in = time.monotonic() - begun
            errors = []
            for call in stalled:
                with pytest.raises(grpc.RpcError) as err:
                    call.result(timeout=10)
                errors.append(err.value)
            stalled_in = time.monotonic() - begun
            read = take(steady(), timeout=20)
        finally:
            stop.set()
    # Assert: the third refused at once, with the hint; both stalled ones cancelled
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert refused.value.details().startswith("'ipv4:127.0.0.1:")
    assert " holds 2 takes; retry in " in refused.value.details()
    assert retry_after_s(refused.value) is not None and refused_in < TIMEOUT_S
    assert [e.code() for e in errors] == [grpc.StatusCode.CANCELLED] * 2
    assert TIMEOUT_S <= stalled_in < TIMEOUT_S + 1.5, stalled_in
    # ... their threads and slots given back: a slow but steady stream is read whole
    assert read == b"6"
    assert sorted(server.ended) == ["read", "stalled", "stalled"]
    assert server.refusals == ["takes per caller", "stalled stream", "stalled stream"]
    caller = refused.value.details().split("'")[1]  # insecure: its connection
    assert server.router.slots["takes"].held(caller) == 0
