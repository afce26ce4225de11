"""What a certificate of the federation can no longer do to a party (issue 40, F6): real
daemons in this process on loopback ports, mutual TLS on every channel, and 'carol', a
member of the federation in no job.

- A Push is matched to a job its sender is in, and sized, from its header: a 512 MiB
  envelope is refused before 10 MiB of it are read, and an unknown job and one the
  sender is not in get the same answer.
- 160 Push streams that send nothing, on both planes of both parties, neither slow a
  training job nor stop online scoring: one certificate holds at most
  `limits.peer_streams` streams at a party, and each is cancelled after
  `limits.chunk_timeout_s`.
- A real peer's envelopes that nobody takes fill at most `limits.mailbox_mb` of a job's
  mailbox, then are refused naming the sender; none is kept after the job ends.
- `GetPartyInfo` tells the jobs a party holds only to the coordinator.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from vfl.contract.spec import TableSource, parse_spec_text
from vfl.coordinator.client import CoordinatorClient
from vfl.coordinator.server import create_coordinator_server
from vfl.party.config import PartyConfig
from vfl.party.limits import Limits
from vfl.party.server import PartyServer, create_party_server
from vfl.proto import party_pb2 as pb, party_pb2_grpc
from vfl.rpc import PLANE_KEY, dial, retry_after_s
from vfl.secure.channel import Mailbox
from vfl.secure.pki.federation import load_identity, local_federation

from tests.support.data import FATE
from tests.support.jobs import job, wait

pytestmark = [pytest.mark.grpc, pytest.mark.alone]

MiB = 1 << 20
LIMITS = {"max_envelope_mb": 4, "mailbox_mb": 8, "peer_streams": 16, "chunk_timeout_s": 3.0}
SLOW = "network: {bandwidth_mbps: 1000, rtt_ms: 20}\n"  # ~20 ms a round: it trains for seconds


@dataclass
class Federation:
    pki: Path
    coordinator: str
    bank: PartyServer
    shop: PartyServer

    def client(self, identity: str = "admin") -> CoordinatorClient:
        return CoordinatorClient(self.coordinator, load_identity(self.pki, identity))

    @contextmanager
    def stub(self, party: PartyServer, identity: str) -> Iterator[party_pb2_grpc.PartyServiceStub]:
        """`identity`'s stub of `party`'s service."""
        pid = party.daemon.config.party_id
        with dial(party.address, load_identity(self.pki, identity), expect=pid) as channel:
            yield party_pb2_grpc.PartyServiceStub(channel)


@pytest.fixture(scope="module")
def fed(tmp_path_factory) -> Iterator[Federation]:
    pki = local_federation(
        tmp_path_factory.mktemp("pki"), ("coordinator", "admin", "bank", "shop", "carol")
    )
    db = tmp_path_factory.mktemp("db") / "jobs.sqlite"
    coord = create_coordinator_server(str(db), "127.0.0.1:0", load_identity(pki, "coordinator"))
    address = f"127.0.0.1:{coord.port}"
    states = tmp_path_factory.mktemp("states")
    parties = [
        create_party_server(
            PartyConfig(
                pid,
                "127.0.0.1:0",
                address,
                datasets={"breast": TableSource(path=str(FATE / file), label=y)},
                state_dir=states / pid,
                limits=Limits.model_validate(LIMITS),
            ),
            load_identity(pki, pid),
        )
        for pid, file, y in (
            ("bank", "breast_hetero_guest.csv", "y"),
            ("shop", "breast_hetero_host.csv", None),
        )
    ]
    yield Federation(pki, address, *parties)
    for server in (*parties, coord):
        server.stop(0)


class Envelope:
    """A Push stream of one envelope of `size` bytes in 1 MiB chunks, made as they are
    read; `sent` counts the bytes the client has taken from it."""

    def __init__(self, job_id: str, tag: str, sender: str, size: int, receiver: str = "bank"):
        self.head = pb.PushChunk(
            job_id=job_id, tag=tag, sender=sender, receiver=receiver, total_size=size
        )
        self.size, self.sent = size, 0

    def __iter__(self) -> Iterator[pb.PushChunk]:
        block = b"\0" * MiB
        first = min(MiB, self.size)
        self.head.data = block[:first]
        self.sent = first
        yield self.head
        while self.sent < self.size:
            part = block[: min(MiB, self.size - self.sent)]
            self.sent += len(part)
            yield pb.PushChunk(data=part)


def refused(stub: party_pb2_grpc.PartyServiceStub, envelope: Envelope) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as err:
        stub.Push(iter(envelope), timeout=30)
    return err.value


def prepared(fed: Federation, job_id: str) -> None:
    """Have the bank hold job `job_id` (of bank and shop) prepared, as the coordinator does."""
    spec = parse_spec_text(job()).to_json()
    peers = [pb.PeerAddress(party_id="shop", address=fed.shop.address)]
    with fed.stub(fed.bank, "coordinator") as bank:
        bank.PrepareJob(
            pb.PrepareJobRequest(job_id=job_id, spec_json=spec, peers=peers), timeout=30
        )


def abort(fed: Federation, job_id: str) -> None:
    with fed.stub(fed.bank, "coordinator") as bank:
        bank.AbortJob(pb.AbortJobRequest(job_id=job_id, reason="test"), timeout=10)


def test_a_push_is_matched_to_its_job_and_sized_before_its_payload_is_read(fed) -> None:
    # Prepare: the bank holds job "held" of bank and shop
    prepared(fed, "held")
    big = 512 * MiB
    try:
        # Execute: 512 MiB for an unknown job and for one carol is not in; from shop, a
        # member of "held", 512 MiB over the bank's max_envelope_mb
        with fed.stub(fed.bank, "carol") as carol:
            unknown = Envelope("nope", "t", "carol", big)
            not_in = Envelope("held", "t", "carol", big)
            unknown_err, not_in_err = refused(carol, unknown), refused(carol, not_in)
        with fed.stub(fed.bank, "shop") as shop:
            too_big = Envelope("held", "t", "shop", big)
            too_big_err = refused(shop, too_big)
    finally:
        abort(fed, "held")
    with fed.stub(fed.bank, "carol") as carol:
        ended_err = refused(carol, Envelope("held", "t", "carol", 1))
    with fed.stub(fed.bank, "shop") as shop:
        late_err = refused(shop, Envelope("held", "t", "shop", 1))
    # Assert: each refused before 10 MiB of it was read
    assert [e.sent < 10 * MiB for e in (unknown, not_in, too_big)] == [True] * 3, [
        e.sent / MiB for e in (unknown, not_in, too_big)
    ]
    # ... a job carol is not in, held or ended, looks exactly like an unknown one
    for err in (unknown_err, not_in_err, ended_err):
        assert err.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert unknown_err.details() == (
        "job nope is not known to party 'bank' (or party 'carol' is not in it)"
    )
    assert not_in_err.details() == unknown_err.details().replace("nope", "held")
    assert ended_err.details() == not_in_err.details()
    # ... a member is told the size and the setting, and that its job ended
    assert too_big_err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert too_big_err.details() == (
        "envelope 't' of 512.0 MiB from party 'shop' is larger than party 'bank' takes "
        "(4 MiB, its config's limits.max_envelope_mb); use smaller batches, or ask its "
        "operator to raise that limit"
    )
    assert "already ended on party 'bank'" in late_err.details()


def test_only_the_coordinator_is_told_the_jobs_a_party_holds(fed) -> None:
    prepared(fed, "private")
    try:
        infos = {}
        for identity in ("coordinator", "shop", "carol", "admin"):
            with fed.stub(fed.bank, identity) as bank:
                infos[identity] = bank.GetPartyInfo(pb.GetPartyInfoRequest(), timeout=10)
    finally:
        abort(fed, "private")
    assert "private" in infos["coordinator"].running_jobs
    for identity in ("shop", "carol", "admin"):
        info = infos[identity]
        assert not info.running_jobs and not info.started_jobs, identity
        assert info.party_id == "bank" and info.datasets == ["breast"]  # the rest as before


@pytest.fixture(scope="module")
def model(fed) -> str:
    with fed.client() as client:
        view = wait(client, client.submit(job(name="model", epochs=1)))
    assert view.state == "SUCCEEDED", view.reason
    return view.job_id


def rounds(client: CoordinatorClient, job_id: str, at_least: int = 0) -> int:
    """The job's newest round, once it is at least `at_least`."""
    deadline = time.monotonic() + 60
    while (done := client.get(job_id).result.round) < at_least:
        assert time.monotonic() < deadline, done
        time.sleep(0.05)
    return done


def test_stalled_streams_neither_slow_training_nor_stop_scoring(fed, model) -> None:
    # Prepare: a training job under way
    stop = threading.Event()

    def silent() -> Iterator[pb.PushChunk]:
        stop.wait(30)
        yield from ()

    with fed.client() as client:
        job_id = client.submit(job(name="stalled", epochs=25) + SLOW)
        rounds(client, job_id, at_least=5)
        # Execute: carol opens 40 streams that send nothing on each plane of each party
        calls = []
        with fed.stub(fed.bank, "carol") as to_bank, fed.stub(fed.shop, "carol") as to_shop:
            opened = time.monotonic()
            for stub in (to_bank, to_shop):
                for metadata in ((), ((PLANE_KEY, "session"),)):
                    calls += [
                        stub.Push.future(silent(), timeout=30, metadata=metadata) for _ in range(40)
                    ]
            time.sleep(0.3)
            before = rounds(client, job_id)
            with fed.stub(fed.bank, "admin") as bank:
                scored = bank.Predict(pb.PredictRequest(model_id=model, ids=["133"]), timeout=10)
            time.sleep(max(0.0, opened + LIMITS["chunk_timeout_s"] - 0.2 - time.monotonic()))
            during = rounds(client, job_id) - before
            outcomes = []
            for call in calls:
                with pytest.raises(grpc.RpcError) as err:
                    call.result(timeout=10)
                outcomes.append(err.value)
            ended_in = time.monotonic() - opened
            stop.set()
        view = wait(client, job_id)
    # Assert: the job trained on (20 to 50 rounds a second) and scoring answered
    assert during >= 5, during  # frozen, it would be 0 or 1
    assert scored.results[0].values and not scored.results[0].error
    # ... each plane of each party held 16 of carol's streams, cancelled after 3 s, and
    # refused the other 24 at once
    codes = [o.code() for o in outcomes]
    assert codes.count(grpc.StatusCode.RESOURCE_EXHAUSTED) == 4 * 24, codes
    assert codes.count(grpc.StatusCode.CANCELLED) == 4 * 16, codes
    assert ended_in < LIMITS["chunk_timeout_s"] + 2.0, ended_in
    busy = next(o for o in outcomes if o.code() == grpc.StatusCode.RESOURCE_EXHAUSTED)
    assert busy.details().startswith(
        "'carol' holds 16 Push streams at once at party 'bank', the most its config's "
        "limits.peer_streams lets one certificate hold; retry in "
    )
    assert retry_after_s(busy) is not None
    assert refusals(fed.shop, "data per caller") >= 24
    assert refusals(fed.shop, "session per caller") >= 24
    assert refusals(fed.shop, "stalled stream") >= 32
    assert view.state == "SUCCEEDED", view.reason


def refusals(party: PartyServer, at: str) -> float:
    """What the party's metrics counted in `vfl_party_refused_total{at}`."""
    counted = party.daemon.metrics.registry.get_sample_value("vfl_party_refused_total", {"at": at})
    return counted or 0.0


def held_payloads() -> int:
    """Bytes every mailbox in this process holds."""
    gc.collect()
    return sum(o.held_bytes for o in gc.get_objects() if isinstance(o, Mailbox))


def test_envelopes_nobody_takes_are_bounded_and_dropped_when_the_job_ends(fed) -> None:
    # Prepare: a training job under way
    with fed.client() as client:
        job_id = client.submit(job(name="junk", epochs=20) + SLOW)
        rounds(client, job_id, at_least=2)
        with fed.stub(fed.bank, "shop") as shop:
            # Execute: shop sends a header, then stalls; then envelopes nobody asks for
            stop = threading.Event()

            def header_then_nothing() -> Iterator[pb.PushChunk]:
                head = Envelope(job_id, "junk/stalled", "shop", 3 * MiB).head
                yield pb.PushChunk(**{f.name: v for f, v in head.ListFields()}, data=b"\0")
                stop.wait(30)

            begun = time.monotonic()
            with pytest.raises(grpc.RpcError) as err:
                shop.Push(header_then_nothing(), timeout=30)
            stop.set()
            stalled_err, stalled_in = err.value, time.monotonic() - begun
            kept = [
                shop.Push(iter(Envelope(job_id, f"junk/{n}", "shop", 3 * MiB)), timeout=30)
                for n in range(2)
            ]
            full = refused(shop, Envelope(job_id, "junk/2", "shop", 3 * MiB))
            holding = held_payloads()
        view = wait(client, job_id)
    # Assert: the stalled stream was cancelled and gave its room back
    assert stalled_err.code() == grpc.StatusCode.CANCELLED, stalled_err
    assert stalled_in < LIMITS["chunk_timeout_s"] + 1.0, stalled_in
    # ... two junk envelopes were taken, the third refused: 8 MiB is the job's bound
    assert [k.duplicate for k in kept] == [False, False]
    assert full.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and retry_after_s(full) == 0.5
    assert full.details().startswith(
        f"party 'bank' takes no more of job {job_id}'s envelopes now: the mailbox holds "
    )
    assert "envelope 'junk/2' of 3.0 MiB from party 'shop' does not fit" in full.details()
    assert "limits.mailbox_mb, 8 MiB" in full.details()
    assert holding >= 6 * MiB and refusals(fed.bank, "mailbox") == 1
    # ... the job trained on beside them, and nothing of them is kept once it ended
    assert view.state == "SUCCEEDED", view.reason
    deadline = time.monotonic() + 10
    while held_payloads() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert held_payloads() == 0
