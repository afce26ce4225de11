"""The fuzzing corpus of tests/e2e/test_fuzz.py: every RPC of both daemons (from their
descriptors, so a new RPC is fuzzed at once) and Hypothesis strategies of their requests.

Corpus: random bytes as the raw request; valid requests truncated, bit-flipped, or of
another message type (`raw_requests`); random field values of the right types (any text,
any int64, any bytes, real and unknown job and party ids, streams of 0-4 Push chunks with
inconsistent sizes); job specs with one field replaced, deleted or added (random JSON
values); report payloads of random JSON (`field_requests`).
"""

from __future__ import annotations

import copy
import json

import yaml
from google.protobuf.descriptor import FieldDescriptor as FD
from google.protobuf.message_factory import GetMessageClass
from hypothesis import strategies as st
from vfl.contract.spec import parse_spec_text
from vfl.proto import coordinator_pb2 as cpb, party_pb2 as ppb

from tests.support.jobs import job


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
GHOST_JOB = job(name="ghost").replace("id: bank", "id: ghost-a").replace("id: shop", "id: ghost-b")


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
