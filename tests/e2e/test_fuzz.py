"""Fuzzing every RPC of both daemons with malformed and random protobufs (Hypothesis).

Corpus: random bytes as the raw request; valid requests truncated, bit-flipped, or of
another message type; random field values of the right types (any text, any int64, any
bytes, real and unknown job and party ids, streams of 0-4 Push chunks with inconsistent
sizes); job specs with one field replaced, deleted or added (random JSON values); report
payloads of random JSON; and one message over the size limit per RPC. Every call must end
in a valid response or a status other than UNKNOWN with a message; afterwards both
daemons still pass a health check and run a real job. The number of cases is printed in
the terminal summary ("fuzz: N cases ..."). The corpus: tests/support/fuzz.py.
"""

from __future__ import annotations

import re
from collections import Counter

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, given, settings
from vfl.contract.spec import TableSource, parse_spec_text
from vfl.coordinator.client import CoordinatorClient
from vfl.coordinator.server import create_coordinator_server
from vfl.party.config import PartyConfig
from vfl.party.server import create_party_server
from vfl.proto import party_pb2 as ppb
from vfl.rpc import MAX_MESSAGE_BYTES

from tests.support.data import FATE
from tests.support.fuzz import COORD, GHOST_JOB, PARTY, RPCS, field_requests, raw_requests
from tests.support.jobs import job, wait

pytestmark = pytest.mark.grpc

EXAMPLES = 150
QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"|\d+")


class Tally:
    """Cases per RPC and status; reports itself in pytest's terminal summary."""

    def __init__(self) -> None:
        self.cases: Counter[str] = Counter()
        self.codes: Counter[str] = Counter()
        self.messages: Counter[str] = Counter()  # method, status, message start

    def record(self, method: str, code: str, message: str = "") -> None:
        name = method.rsplit("/", 1)[-1]
        self.cases[name] += 1
        self.codes[code] += 1
        short = QUOTED.sub("_", message)[:90]
        self.messages[f"{name} {code}: {short}"] += 1

    def line(self) -> str:
        total = sum(self.cases.values())
        codes = ", ".join(f"{k} {v}" for k, v in self.codes.most_common())
        return f"fuzz: {total} cases on {len(self.cases)} RPCs of both daemons ({codes})"

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.cases:
            terminalreporter.write_line(self.line())


@pytest.fixture(scope="module")
def tally(request) -> Tally:
    t = Tally()
    request.config.pluginmanager.register(t, f"vfl-fuzz-tally-{id(t)}")
    yield t
    print(t.line())
    print("\n".join(f"{n:5d} {m}" for m, n in sorted(t.messages.items())))


@pytest.fixture(scope="module")
def daemons(tmp_path_factory):
    db = tmp_path_factory.mktemp("fuzz") / "jobs.sqlite"
    coord = create_coordinator_server(str(db), "127.0.0.1:0", health_interval_s=0.5)
    address = f"127.0.0.1:{coord.port}"
    bank = _party("bank", "breast_hetero_guest.csv", address, label="y")
    shop = _party("shop", "breast_hetero_host.csv", address)
    client = CoordinatorClient(address)
    done = wait(client, client.submit(job(name="warmup", epochs=1)))  # ids to replay against
    # jobs that stay open: prepared on bank, never started; stored, never launched
    spec = parse_spec_text(job()).to_json()
    bank.daemon.prepare("open", spec, {"shop": f"127.0.0.1:{shop.port}"})
    ghost = parse_spec_text(GHOST_JOB).to_json()
    held = [coord.lifecycle.store.create("held", GHOST_JOB, ghost) for _ in range(20)]
    channels = {
        PARTY: grpc.insecure_channel(f"127.0.0.1:{bank.port}", options=_big()),
        COORD: grpc.insecure_channel(address, options=_big()),
    }
    ids = {PARTY: [done.job_id, "open"], COORD: [done.job_id, *held]}
    yield {"channels": channels, "client": client, "job_ids": ids}
    for ch in channels.values():
        ch.close()
    client.close()
    for server in (bank, shop, coord):
        server.stop(0)


def _party(party_id: str, file: str, coordinator: str, label: str | None = None):
    data = {"breast": TableSource(path=str(FATE / file), label=label)}
    return create_party_server(PartyConfig(party_id, "127.0.0.1:0", coordinator, datasets=data))


def _big() -> list[tuple[str, int]]:
    return [("grpc.max_send_message_length", 4 * MAX_MESSAGE_BYTES)]


def call(daemons, tally: Tally, method: str, request) -> None:
    """Send `request` (bytes, or a list of bytes for Push) and check the outcome."""
    kind, _, response_type = RPCS[method]
    channel = daemons["channels"][PARTY if method.startswith(PARTY) else COORD]
    stub = getattr(channel, kind)(method)  # no (de)serializers: raw bytes both ways
    try:
        if kind == "stream_unary":
            responses = [stub(iter(request), timeout=10)]
        elif kind == "unary_stream":  # the first response (a job may never end)
            stream = stub(request, timeout=10)
            responses = [next(stream)]
            stream.cancel()
        else:
            responses = [stub(request, timeout=10)]
    except grpc.RpcError as exc:
        tally.record(method, exc.code().name, exc.details() or "")
        assert exc.code() != grpc.StatusCode.UNKNOWN, f"{method}: unhandled: {exc.details()}"
        assert exc.details(), f"{method}: {exc.code().name} without a message"
        return
    tally.record(method, "OK")
    for raw in responses:
        response_type.FromString(raw)  # a valid response parses


# --- tests ------------------------------------------------------------------------------

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=True,  # the same cases every run: a failure reproduces
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.mark.parametrize("method", list(RPCS))
def test_malformed_bytes_get_a_status_with_a_message(daemons, tally, method) -> None:
    @FUZZ
    @given(request=raw_requests(method))
    def run(request) -> None:
        call(daemons, tally, method, request)

    run()


@pytest.mark.parametrize("method", list(RPCS))
def test_random_field_values_get_a_response_or_a_status(daemons, tally, method) -> None:
    @FUZZ
    @given(request=field_requests(method, daemons["job_ids"]))
    def run(request) -> None:
        call(daemons, tally, method, request)

    run()


@pytest.mark.parametrize("method", list(RPCS))
def test_an_oversized_message_is_refused_with_the_limit(daemons, tally, method) -> None:
    big = ppb.PushChunk(data=b"\0" * (MAX_MESSAGE_BYTES + 1)).SerializeToString()
    kind, _, _ = RPCS[method]
    channel = daemons["channels"][PARTY if method.startswith(PARTY) else COORD]
    stub = getattr(channel, kind)(method)
    with pytest.raises(grpc.RpcError) as err:
        out = stub(iter([big]) if kind == "stream_unary" else big, timeout=30)
        list(out) if kind == "unary_stream" else out
    tally.record(method, err.value.code().name, err.value.details())
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "larger than max" in err.value.details()


def test_replayed_and_late_envelopes_get_a_clear_status(daemons) -> None:
    finished = daemons["job_ids"][PARTY][0]
    request = ppb.PushChunk(job_id=finished, tag="train/e0/b0/fwd", sender="shop", receiver="bank")
    stub = daemons["channels"][PARTY].stream_unary(
        PARTY + "Push", ppb.PushChunk.SerializeToString, ppb.PushResponse.FromString
    )
    with pytest.raises(grpc.RpcError) as err:
        stub(iter([request]), timeout=10)
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "already ended on party 'bank' (finished)" in err.value.details()
    assert "late or was replayed" in err.value.details()


def test_out_of_order_and_duplicate_tags_on_an_open_job(daemons) -> None:
    stub = daemons["channels"][PARTY].stream_unary(
        PARTY + "Push", ppb.PushChunk.SerializeToString, ppb.PushResponse.FromString
    )

    def push(tag: str) -> bool:
        chunk = ppb.PushChunk(
            job_id="open",
            tag=f"order/{tag}",
            sender="shop",
            receiver="bank",
            data=b"\x08\x01",
            total_size=2,
        )
        return stub(iter([chunk]), timeout=10).duplicate

    assert [push("b"), push("a"), push("b"), push("a")] == [False, False, True, True]


def test_both_daemons_keep_serving_after_the_fuzzing(daemons, tally) -> None:
    for channel in daemons["channels"].values():
        check = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
        assert check.status == health_pb2.HealthCheckResponse.SERVING
    client = daemons["client"]
    view = wait(client, client.submit(job(name="after-fuzz", epochs=1)))
    assert view.state == "SUCCEEDED", view.reason
    # every RPC got its raw-bytes cases, its oversized message and field cases (requests
    # with few fields, e.g. none or one flag, exhaust their space in one or two)
    assert set(tally.cases) == {method.rsplit("/", 1)[-1] for method in RPCS}
    assert all(count >= EXAMPLES + 2 for count in tally.cases.values()), tally.cases
