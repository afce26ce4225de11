"""Under mutual TLS, a closed socket is never taken for a rejected certificate: a party
daemon (a `vfl party serve --tls` process) killed with SIGKILL in the middle of a call
fails it as a lost connection that a retry may cure, while a client with a certificate
from another CA is told, as before, that its certificate was rejected."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import pytest
import yaml
from vfl.party.transport.grpc_channel import GrpcChannel
from vfl.proto import party_pb2 as pb, party_pb2_grpc
from vfl.rpc import PeerClients, dial, explain, handshake_failed
from vfl.secure.channel import Mailbox
from vfl.secure.errors import ChannelError
from vfl.secure.pki.certs import PartyFiles
from vfl.secure.pki.federation import load_identity, local_federation
from vfl.secure.wire.payload import control_to_payload

pytestmark = pytest.mark.subprocess


@pytest.fixture
def pki(tmp_path) -> dict[str, Path]:
    return {
        "fed": local_federation(tmp_path / "fed", ("bank", "shop")),
        "other": local_federation(tmp_path / "other", ("shop",)),
    }


def serve_bank(tmp_path: Path, fed: Path) -> tuple[subprocess.Popen, str]:
    """`vfl party serve --tls` for party bank, alone; its process and address."""
    config, port_file = tmp_path / "bank.yaml", tmp_path / "bank.port"
    config.write_text(yaml.safe_dump({"party": "bank", "listen": "127.0.0.1:0"}))
    args = ["party", "serve", "--config", str(config), "--tls", str(fed)]
    log = (tmp_path / "bank.log").open("a")
    proc = subprocess.Popen(
        [sys.executable, "-m", "vfl.cli.main", *args, "--port-file", str(port_file)],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not (port_file.exists() and port_file.read_text().strip()):
        log_text = (tmp_path / "bank.log").read_text()
        assert proc.poll() is None and time.monotonic() < deadline, log_text
        time.sleep(0.05)
    return proc, f"127.0.0.1:{port_file.read_text().strip()}"


def test_a_daemon_killed_mid_call_is_a_closed_connection_not_a_rejected_certificate(
    tmp_path, pki
) -> None:
    # Prepare: a Push from shop whose stream stays open before its first chunk (one for a
    # job the daemon does not hold is refused as soon as its header comes)
    proc, address = serve_bank(tmp_path, pki["fed"])
    shop = load_identity(pki["fed"], "shop")
    more = threading.Event()

    def chunks():
        more.wait(30)
        head = {"job_id": "j", "tag": "t", "sender": "shop", "receiver": "bank"}
        yield pb.PushChunk(**head, data=b"x", total_size=1)

    channel = dial(address, shop, expect="bank")
    try:
        stub = party_pb2_grpc.PartyServiceStub(channel)
        call = stub.Push.future(chunks(), timeout=30)
        time.sleep(1.0)  # the daemon holds the call, waiting for its header (10 s at most)
        # Execute
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        with pytest.raises(grpc.RpcError) as err:
            call.result(timeout=30)
    finally:
        more.set()
        channel.close()
    # Assert: a lost connection, which retrying may cure; no word of a certificate
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE, err.value.details()
    assert not handshake_failed(err.value, tls=True), err.value.details()
    message = explain(err.value, address, True, "bank")
    assert "certificate" not in message and "closed during the call" in message, message
    # Assert: a job's channel to the dead daemon retries, then names it unreachable
    clients = PeerClients(shop)
    try:
        job = GrpcChannel("shop", "j", Mailbox(), {"bank": address}, clients, send_timeout=2.0)
        with pytest.raises(ChannelError) as lost:
            job.send("bank", "t", control_to_payload({"x": "y"}))
    finally:
        clients.close()
    assert "certificate" not in str(lost.value) and "unreachable" in str(lost.value), lost.value


def test_a_client_certificate_from_another_ca_is_still_a_rejected_certificate(
    tmp_path, pki
) -> None:
    # Prepare
    proc, address = serve_bank(tmp_path, pki["fed"])
    other = pki["other"]
    foreign = PartyFiles(pki["fed"] / "ca.crt", other / "shop.crt", other / "shop.key")
    try:
        # Execute
        with dial(address, foreign, expect="bank") as channel:
            stub = party_pb2_grpc.PartyServiceStub(channel)
            with pytest.raises(grpc.RpcError) as err:
                stub.GetPartyInfo(pb.GetPartyInfoRequest(), timeout=10)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
    # Assert: permanent, and named as a rejected certificate
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    assert handshake_failed(err.value, tls=True), err.value.details()
    message = explain(err.value, address, True, "bank")
    assert "rejecting this client's certificate" in message, message
