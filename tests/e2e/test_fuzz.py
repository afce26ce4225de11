"""Fuzzing every RPC of both daemons with malformed and random protobufs (Hypothesis).

Corpus: random bytes as the raw request; valid requests truncated, bit-flipped, or of
another message type; random field values of the right types (any text, any int64, any
bytes, real and unknown job and party ids, streams of 0-4 Push chunks with inconsistent
sizes); job specs with one field replaced, deleted or added (random JSON values); report
payloads of random JSON; and one message over the size limit per RPC. Every call must end
in a valid response or a status other than UNKNOWN with a message; afterwards both
daemons still pass a health check and run a real job. The number of cases is printed in
the terminal summary ("fuzz: N cases ...").
"""

from __future__ import annotations

import copy
import json
import re
from collections import Counter

import grpc
import pytest
import yaml
from google.protobuf.descriptor import FieldDescriptor as FD
from google.protobuf.message_factory import GetMessageClass
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from vfl.contract.spec import TableSource, parse_spec_text
from vfl.coordinator.client import CoordinatorClient
from vfl.coordinator.server import create_coordinator_server
from vfl.party.config import PartyConfig
from vfl.party.server import create_party_server
from vfl.proto import coordinator_pb2 as cpb
from vfl.proto import party_pb2 as ppb
from vfl.proto.rpc import MAX_MESSAGE_BYTES

from tests.support.data import FATE
from tests.support.jobs import job, wait

pytestmark = pytest.mark.grpc

EXAMPLES = 150


def _rpcs() -> dict[str, tuple[str, type, type]]:
    """Every RPC of both services, from their descriptors (a new RPC is fuzzed at once):
    method path -> (kind, request type, response type)."""
    out = {}
    for module, service in ((ppb, "PartyService"), (cpb, "CoordinatorService")):
        for m in module.DESCRIPTOR.services_by_name[service].methods:
            kind = ("stream" if m.client_streaming else "unary") + "_"
            kind += "stream" if m.server_streaming else "unary"
            request, response = GetMessageClass(m.input_type), GetMessageClass(m.output_type)
            out[f"/vfl.v1.{service}/{m.name}"] = (kind, request, response)
    return out


RPCS = _rpcs()
PARTY, COORD = "/vfl.v1.PartyService/", "/vfl.v1.CoordinatorService/"
QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"|\d+")
GHOST_JOB = job(name="ghost").replace("id: bank", "id: ghost-a").replace("id: shop", "id: ghost-b")


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


# --- strategies -------------------------------------------------------------------------

PARTY_IDS = ["bank", "shop", "coordinator", "ghost-a", "ghost-b", ""]
ids = st.one_of(st.text(max_size=40), st.sampled_from(PARTY_IDS))
int64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda kids: (
        st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids, max_size=3)
    ),
    max_leaves=8,
)


def _paths(doc, prefix=()):
    yield prefix
    items = (
        doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    )
    for key, value in items:
        yield from _paths(value, (*prefix, key))


@st.composite
def mutated(draw, base: dict) -> dict:
    """`base` with one field replaced by a random JSON value, deleted, or one added."""
    doc = copy.deepcopy(base)
    path = draw(st.sampled_from([p for p in _paths(doc) if p]))
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    op = draw(st.sampled_from(["set", "delete", "add"]))
    if op == "set":
        parent[path[-1]] = draw(json_values)
    elif op == "delete":
        del parent[path[-1]]
    elif isinstance(parent, dict):
        parent[draw(st.text(max_size=10))] = draw(json_values)
    return doc


def spec_texts(spec_yaml: str, as_json: bool) -> st.SearchStrategy[str]:
    spec = parse_spec_text(spec_yaml)
    base = json.loads(spec.to_json())
    dump = json.dumps if as_json else (lambda d: yaml.safe_dump(d, sort_keys=False))
    return st.one_of(st.text(max_size=300), mutated(base).map(dump))


def chunk(job_ids) -> st.SearchStrategy[ppb.PushChunk]:
    return st.builds(
        ppb.PushChunk,
        job_id=job_ids,
        tag=st.text(max_size=30),
        sender=ids,
        receiver=st.one_of(st.just("bank"), ids),
        data=st.binary(max_size=64),
        total_size=st.one_of(st.integers(0, 256), int64),
    )


def envelope(job_ids) -> st.SearchStrategy[list[ppb.PushChunk]]:
    """One consistent chunk (size matches) from a peer, a stranger or bank itself."""
    senders = st.one_of(st.sampled_from(["shop", "bank", "coordinator"]), ids)
    head = st.builds(
        ppb.PushChunk,
        job_id=job_ids,
        tag=st.text(min_size=1, max_size=30),
        sender=senders,
        receiver=st.just("bank"),
        data=st.binary(max_size=64),
    )
    return head.map(_consistent)


def _consistent(chunk: ppb.PushChunk) -> list[ppb.PushChunk]:
    fixed = ppb.PushChunk()
    fixed.CopyFrom(chunk)
    fixed.total_size = len(chunk.data)
    return [fixed]


def field_requests(method: str, job_ids: dict[str, list[str]]) -> st.SearchStrategy:
    """Requests of the right message type with random field values."""
    known = job_ids[PARTY if method.startswith(PARTY) else COORD]
    jobs = st.one_of(st.text(max_size=40), st.sampled_from(known))
    name = method.rsplit("/", 1)[-1]
    if name == "Push":
        streams = st.one_of(st.lists(chunk(jobs), max_size=4), envelope(jobs))
        return streams.map(lambda cs: [c.SerializeToString() for c in cs])
    strategies = {
        "PrepareJob": st.builds(
            ppb.PrepareJobRequest,
            job_id=jobs,
            spec_json=spec_texts(job(), as_json=True),
            peers=st.lists(
                st.builds(ppb.PeerAddress, party_id=st.text(), address=st.text()), max_size=2
            ),
        ),
        "StartJob": st.builds(ppb.StartJobRequest, job_id=st.one_of(st.text(), st.just(known[0]))),
        "AbortJob": st.builds(ppb.AbortJobRequest, job_id=st.text(), reason=st.text()),
        "GetPartyInfo": st.just(ppb.GetPartyInfoRequest()),
        "SubmitJob": st.builds(
            cpb.SubmitJobRequest, spec_yaml=spec_texts(GHOST_JOB, as_json=False)
        ),
        "ListJobs": st.just(cpb.ListJobsRequest()),
        "GetJob": st.builds(cpb.GetJobRequest, job_id=jobs),
        "WatchJob": st.builds(cpb.WatchJobRequest, job_id=jobs),
        "CancelJob": st.builds(cpb.CancelJobRequest, job_id=st.text(max_size=40)),
        "RegisterParty": st.builds(
            cpb.RegisterPartyRequest,
            party_id=st.text(max_size=70),
            address=st.text(),
            datasets=st.lists(st.text(), max_size=3),
        ),
        "ReportProgress": st.builds(
            cpb.ReportProgressRequest,
            job_id=jobs,
            party_id=st.one_of(st.sampled_from(["ghost-a", "ghost-b"]), ids),
        ).flatmap(lambda request: report_events().map(lambda event: with_event(request, event))),
    }
    strategy = strategies[name] if name in strategies else any_fields(RPCS[method][1], jobs)
    return strategy.map(lambda m: m.SerializeToString())


def any_fields(message: type, ids: st.SearchStrategy) -> st.SearchStrategy:
    """A request of type `message` with random values in its scalar fields (ids: known
    and random job ids; text fields: any text or a small YAML mapping)."""
    yaml_like = st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3).map(
        yaml.safe_dump
    )
    by_type = {
        FD.TYPE_STRING: st.one_of(st.text(max_size=40), yaml_like),
        FD.TYPE_INT64: st.integers(-(2**63), 2**63 - 1),
        FD.TYPE_BOOL: st.booleans(),
        FD.TYPE_BYTES: st.binary(max_size=64),
    }
    fields = {}
    for f in message.DESCRIPTOR.fields:
        value = ids if f.name.endswith("_id") else by_type.get(f.type)
        if value is None:
            continue
        fields[f.name] = st.lists(value, max_size=3) if f.is_repeated else value
    return st.builds(message, **fields)


def report_events() -> st.SearchStrategy:
    """One event of a progress report, each field anything its type allows (NaN, unknown
    enum values, huge numbers)."""
    numbers = st.floats(allow_nan=True, allow_infinity=True)
    counts = st.integers(-(2**63), 2**63 - 1)
    metrics = st.dictionaries(st.text(max_size=12), numbers, max_size=4)
    return st.one_of(
        st.builds(cpb.StageReached, state=st.integers(-3, 20)).map(lambda m: ("stage", m)),
        st.builds(cpb.Aligned, intersection_size=counts, psi_seconds=numbers).map(
            lambda m: ("aligned", m)
        ),
        st.builds(cpb.RoundDone, round=counts, total_rounds=counts, loss=numbers).map(
            lambda m: ("round", m)
        ),
        st.builds(cpb.Validated, round=counts, metrics=metrics).map(lambda m: ("validation", m)),
        st.builds(cpb.PartyDone, rounds=counts, bytes_sent=counts, metrics=metrics).map(
            lambda m: ("done", m)
        ),
        st.builds(cpb.PartyFailed, reason=st.text(max_size=50)).map(lambda m: ("failed", m)),
        st.just(("none", None)),
    )


def with_event(request, event) -> object:
    name, message = event
    if message is not None:
        getattr(request, name).CopyFrom(message)
    return request


def raw_requests(method: str) -> st.SearchStrategy:
    """Malformed bytes: random, or a valid message truncated, bit-flipped or retyped."""
    valid = [t().SerializeToString() for _, t, _ in RPCS.values()] + [
        ppb.PushChunk(
            job_id="j", tag="t", sender="shop", receiver="bank", data=b"\x08\x01", total_size=2
        ).SerializeToString(),
        cpb.ReportProgressRequest(
            job_id="j", party_id="bank", round=cpb.RoundDone(round=1, total_rounds=2, loss=0.5)
        ).SerializeToString(),
    ]
    base = st.sampled_from([v for v in valid if v])
    truncated = base.flatmap(lambda b: st.integers(0, len(b) - 1).map(lambda n: b[:n]))
    flipped = base.flatmap(
        lambda b: st.tuples(st.integers(0, len(b) - 1), st.integers(0, 7)).map(
            lambda nb: b[: nb[0]] + bytes([b[nb[0]] ^ (1 << nb[1])]) + b[nb[0] + 1 :]
        )
    )
    one = st.one_of(st.binary(max_size=512), truncated, flipped, st.sampled_from(valid))
    return st.lists(one, max_size=4) if RPCS[method][0] == "stream_unary" else one


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
