"""`vfl doctor` against real daemons on loopback (a coordinator and two parties with
mutual TLS, each a real gRPC server in this process): a healthy federation, and each
fault diagnosed in one line naming the party, the check and the fix."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from vfl.cli.main import main
from vfl.coordinator.server import CoordinatorServer, create_coordinator_server
from vfl.party.config import PartyConfig
from vfl.party.server import PartyServer, create_party_server
from vfl.party.transport.grpc_channel import chunks
from vfl.party.transport.ping import PING_JOB
from vfl.proto import common_pb2, party_pb2, party_pb2_grpc
from vfl.rpc import COORDINATOR_ID, dial
from vfl.secure.pki.federation import ADMIN_ID, load_identity, local_federation

pytestmark = pytest.mark.grpc


class Federation:
    def __init__(self, root: Path) -> None:
        self.tls = local_federation(root / "tls", [COORDINATOR_ID, ADMIN_ID, "bank", "shop"])
        self.coordinator: CoordinatorServer = create_coordinator_server(
            str(root / "jobs.sqlite"), "127.0.0.1:0", load_identity(self.tls, COORDINATOR_ID)
        )
        self.address = f"127.0.0.1:{self.coordinator.port}"
        self.parties: dict[str, PartyServer] = {}

    def start(self, party_id: str, **config) -> PartyServer:
        cfg = PartyConfig(party_id, coordinator=self.address, **config)
        self.parties[party_id] = create_party_server(cfg, load_identity(self.tls, party_id))
        return self.parties[party_id]

    def doctor(self, capsys) -> tuple[int, list[str]]:
        code = main(
            ["doctor", "--coordinator", self.address, "--tls", str(self.tls), "--identity", "admin"]
        )
        return code, capsys.readouterr().out.splitlines()

    def close(self) -> None:
        for server in self.parties.values():
            server.stop(0)
        self.coordinator.stop(0)


@pytest.fixture
def federation(tmp_path: Path) -> Iterator[Federation]:
    fed = Federation(tmp_path)
    yield fed
    fed.close()


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def failures(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("FAIL")]


def test_healthy_federation_passes_every_check(federation: Federation, capsys) -> None:
    federation.start("bank")
    federation.start("shop")
    code, lines = federation.doctor(capsys)
    assert code == 0, lines
    assert failures(lines) == []
    checks = {tuple(line.split()[1:3]) for line in lines if line.startswith("ok")}
    for subject in ("coordinator", "bank", "shop"):
        assert {(subject, "health"), (subject, "certificate"), (subject, "clock")} <= checks
    assert {("bank", "data"), ("shop", "data")} <= checks  # "data plane"
    assert lines[-1] == "federation ready: the coordinator and 2 parties (bank, shop)"


def test_a_stopped_party_is_one_line(federation: Federation, capsys) -> None:
    federation.start("bank")
    federation.start("shop").stop(0)
    del federation.parties["shop"]
    code, lines = federation.doctor(capsys)
    assert code == 1
    [line] = failures(lines)
    assert line.startswith("FAIL  shop         health")
    assert "is unreachable" in line and "fix: start 'shop' again (`vfl party serve" in line


def test_a_party_address_serving_another_certificate_is_one_line(
    federation: Federation, capsys
) -> None:
    bank = federation.start("bank")
    federation.start("shop", advertise=bank.address)  # shop registers bank's address
    code, lines = federation.doctor(capsys)
    assert code == 1
    [line] = failures(lines)
    assert line.startswith("FAIL  shop         certificate")
    assert f"the daemon at {bank.address} presents a certificate for 'bank', not 'shop'" in line
    assert "fix: check the address it registered" in line and "--party shop" in line


def test_a_blocked_data_plane_port_is_one_line(federation: Federation, capsys) -> None:
    blocked = f"127.0.0.1:{closed_port()}"
    federation.start("bank", peers={"shop": blocked})  # bank reaches shop at a closed port
    federation.start("shop")
    code, lines = federation.doctor(capsys)
    assert code == 1
    [line] = failures(lines)
    assert line.startswith("FAIL  bank         data plane")
    assert f"push to 'shop' at {blocked} failed" in line and "unreachable" in line
    assert f"fix: 'bank's config lists 'shop' at {blocked} under `peers:`" in line


def test_a_party_may_not_run_the_doctor(federation: Federation, capsys) -> None:
    federation.start("bank")
    code = main(
        [
            "doctor",
            "--coordinator",
            federation.address,
            "--tls",
            str(federation.tls),
            "--identity",
            "bank",
        ]
    )
    out = capsys.readouterr().out
    assert code == 1 and "'bank' is a party and may not check the federation" in out


def test_only_the_coordinator_may_make_a_party_ping_and_pings_carry_nothing_else(
    federation: Federation,
) -> None:
    bank = federation.start("bank")
    federation.start("shop")
    request = party_pb2.CheckPeersRequest(
        peers=[party_pb2.PeerAddress(party_id="shop", address="127.0.0.1:9")]
    )
    admin = load_identity(federation.tls, ADMIN_ID)
    with dial(bank.address, admin, expect="bank") as channel:
        with pytest.raises(grpc.RpcError) as denied:
            party_pb2_grpc.PartyServiceStub(channel).CheckPeers(request, timeout=10)
    assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED
    tensor = common_pb2.Payload(tensor=common_pb2.Tensor(dtype="float64", shape=[1]))
    data = tensor.SerializeToString()
    shop_tls = load_identity(federation.tls, "shop")
    with dial(bank.address, shop_tls, expect="bank") as channel:
        with pytest.raises(grpc.RpcError) as refused:
            party_pb2_grpc.PartyServiceStub(channel).Push(
                chunks(PING_JOB, "ping/x", "shop", "bank", data), timeout=10
            )
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "must be a ping" in (refused.value.details() or "")
