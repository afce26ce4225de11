"""Certificate expiry and rotation on running daemons: real gRPC servers on loopback ports
with certificates made the separate-organisation way (`vfl certs request` / `sign`).

A party whose certificate expires is refused by its peers with a message that says to
renew; once its organisation puts a renewed certificate in its folder, the same running
daemon (same port, no restart of anything) serves it and dials with it, and a job runs.
"""

from __future__ import annotations

import datetime as dt
import http.client
import socket
import ssl
import time
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from grpc_health.v1 import health_pb2, health_pb2_grpc
from vfl.contract.spec import TableSource
from vfl.coordinator.client import CoordinatorClient
from vfl.coordinator.server import create_coordinator_server
from vfl.party.config import PartyConfig
from vfl.party.server import create_party_server
from vfl.proto import party_pb2
from vfl.rpc import dial, explain
from vfl.secure.pki.certs import CertError, init_ca
from vfl.secure.pki.federation import load_identity
from vfl.secure.pki.requests import request, sign

from tests.support.data import FATE
from tests.support.jobs import job, wait

pytestmark = pytest.mark.grpc

LIFETIME_S = 4.0  # bank's first certificate: long enough to start and register


def organisation(ca: Path, root: Path, party: str, not_after: dt.datetime | None = None) -> Path:
    """The party's own folder: its key made there, its request signed by the CA."""
    folder = root / party
    sign(ca, request(folder, party, force=True).csr, not_after=not_after)
    return folder


def served_serial(port: int, client: Path, identity: str, expect: str) -> int:
    """The serial number of the certificate a server presents in a fresh TLS handshake."""
    context = ssl.create_default_context(cafile=str(client / "ca.crt"))
    context.load_cert_chain(client / f"{identity}.crt", client / f"{identity}.key")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=expect) as tls:
            der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def health_error(address: str, client: Path, identity: str, expect: str) -> grpc.RpcError:
    with dial(address, load_identity(client, identity), expect=expect) as channel:
        with pytest.raises(grpc.RpcError) as err:
            health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
    return err.value


def test_an_expired_party_is_refused_until_renewed_and_then_serves_without_a_restart(
    tmp_path: Path,
) -> None:
    # Prepare: a CA folder and one folder per organisation; bank's certificate runs out soon
    ca = tmp_path / "ca"
    init_ca(ca)
    orgs = tmp_path / "orgs"
    folders = {p: organisation(ca, orgs, p) for p in ("coordinator", "admin", "shop")}
    expires = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=LIFETIME_S)
    folders["bank"] = organisation(ca, orgs, "bank", not_after=expires)
    coord = create_coordinator_server(
        str(tmp_path / "jobs.sqlite"),
        "127.0.0.1:0",
        load_identity(folders["coordinator"], "coordinator"),
    )
    address = f"127.0.0.1:{coord.port}"
    parties = {
        pid: create_party_server(
            PartyConfig(
                pid,
                "127.0.0.1:0",
                address,
                datasets={"breast": TableSource(path=str(FATE / file), label=y)},
                state_dir=tmp_path / "state" / pid,
            ),
            load_identity(folders[pid], pid),
        )
        for pid, file, y in (
            ("bank", "breast_hetero_guest.csv", "y"),
            ("shop", "breast_hetero_host.csv", None),
        )
    }
    bank, shop = parties["bank"], parties["shop"]
    try:
        # Execute: bank's certificate expires while everything runs
        time.sleep(max(0.0, (expires - dt.datetime.now(dt.timezone.utc)).total_seconds() + 0.5))

        # Assert: at load time, to a peer dialling bank, and to bank dialling a peer
        with pytest.raises(CertError, match="expired on .*renew it: `vfl certs request`"):
            load_identity(folders["bank"], "bank")
        err = health_error(bank.address, folders["admin"], "admin", "bank")
        why = explain(err, bank.address, True, "bank")
        assert "the certificate of party 'bank' has expired; its organisation must renew" in why
        with pytest.raises(grpc.RpcError) as own:
            bank.clients.stub(shop.address, "shop").GetPartyInfo(
                party_pb2.GetPartyInfoRequest(), timeout=10
            )
        why = explain(own.value, shop.address, bank.clients.tls, "shop")
        assert "this process's certificate expired on" in why and "vfl certs request" in why

        # Execute: bank's organisation renews in its folder (a new key); nothing restarts
        port = bank.port
        renewed = organisation(ca, orgs, "bank")
        serial = x509.load_pem_x509_certificate((renewed / "bank.crt").read_bytes()).serial_number

        # Assert: the running server presents the new certificate, its clients dial with it
        assert served_serial(port, folders["admin"], "admin", "bank") == serial
        info = bank.clients.stub(shop.address, "shop").GetPartyInfo(
            party_pb2.GetPartyInfoRequest(), timeout=10
        )
        assert info.party_id == "shop" and bank.port == port
        with CoordinatorClient(address, load_identity(folders["admin"], "admin")) as client:
            view = wait(client, client.submit(job(epochs=1)))
        assert view.state == "SUCCEEDED", view.reason
    finally:
        for server in (*parties.values(), coord):
            server.stop(0)


def test_the_dashboard_serves_a_renewed_coordinator_certificate_without_a_restart(
    tmp_path: Path,
) -> None:
    # Prepare: a coordinator with its dashboard, certificates made the separate-org way
    ca = tmp_path / "ca"
    init_ca(ca)
    folders = {p: organisation(ca, tmp_path / "orgs", p) for p in ("coordinator", "admin")}
    coord = create_coordinator_server(
        str(tmp_path / "jobs.sqlite"),
        "127.0.0.1:0",
        load_identity(folders["coordinator"], "coordinator"),
        ui="127.0.0.1:0",
    )
    try:
        assert coord.ui is not None
        port = int(coord.ui.url.rsplit(":", 1)[1])
        first = served_serial(port, folders["admin"], "admin", "coordinator")

        # Execute: the coordinator's organisation renews in its folder (a new key)
        renewed = organisation(ca, tmp_path / "orgs", "coordinator")
        serial = x509.load_pem_x509_certificate(
            (renewed / "coordinator.crt").read_bytes()
        ).serial_number

        # Assert: the running dashboard presents it at the next handshake, and answers
        assert serial != first
        assert served_serial(port, folders["admin"], "admin", "coordinator") == serial
        context = ssl.create_default_context(cafile=str(folders["admin"] / "ca.crt"))
        context.load_cert_chain(folders["admin"] / "admin.crt", folders["admin"] / "admin.key")
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
        try:
            conn.request("GET", "/api/jobs")
            response = conn.getresponse()
            assert response.status == 200, response.read()
        finally:
            conn.close()
    finally:
        coord.stop(0)
