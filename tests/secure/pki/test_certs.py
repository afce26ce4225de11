"""Federation CA and party certificates: files, identities, validity, and a real TLS handshake."""

from __future__ import annotations

import datetime as dt
import ipaddress
import socket
import ssl
import stat
import threading
from pathlib import Path

import pytest
from cryptography import x509
from vfl.secure.pki.certs import (
    URI_PREFIX,
    CertError,
    init_ca,
    issue,
    party_id_from_cert,
    verify_party_cert,
)


@pytest.fixture
def ca_dir(tmp_path: Path) -> Path:
    init_ca(tmp_path / "pki")
    return tmp_path / "pki"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_init_ca_writes_a_ten_year_ca_with_private_key(tmp_path: Path) -> None:
    files = init_ca(tmp_path / "new" / "pki")
    cert = x509.load_pem_x509_certificate(files.cert.read_bytes())
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    assert dt.timedelta(days=3649) < lifetime < dt.timedelta(days=3651)
    assert mode(files.key) == 0o600


def test_init_ca_refuses_to_overwrite_unless_forced(ca_dir: Path) -> None:
    old_key = (ca_dir / "ca.key").read_bytes()
    with pytest.raises(CertError, match="a CA already exists .* force=True"):
        init_ca(ca_dir)
    assert (ca_dir / "ca.key").read_bytes() == old_key
    init_ca(ca_dir, force=True)
    assert (ca_dir / "ca.key").read_bytes() != old_key


@pytest.mark.parametrize("party_id", ["alice", "coordinator", "host-1.bank_a"])
def test_issue_names_the_party_in_cn_and_san(ca_dir: Path, party_id: str) -> None:
    files = issue(ca_dir, party_id)
    pem = files.cert.read_bytes()
    assert party_id_from_cert(pem) == party_id
    assert party_id_from_cert(pem.decode()) == party_id
    assert verify_party_cert(pem, files.ca_cert.read_bytes()) == party_id
    san = x509.load_pem_x509_certificate(pem).extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    )
    assert san.value.get_values_for_type(x509.DNSName) == ["localhost"]
    assert san.value.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert san.value.get_values_for_type(x509.UniformResourceIdentifier) == [URI_PREFIX + party_id]
    assert mode(files.key) == 0o600


def test_issue_refuses_overwrite_unless_forced(ca_dir: Path) -> None:
    first = issue(ca_dir, "alice").cert.read_bytes()
    with pytest.raises(CertError, match="already exists; pass force=True"):
        issue(ca_dir, "alice")
    assert issue(ca_dir, "alice", force=True).cert.read_bytes() != first


def test_issue_without_ca_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(CertError, match="no CA in .* run init_ca"):
        issue(tmp_path / "nowhere", "alice")


@pytest.mark.parametrize("bad", ["", "has space", "../etc", "-dash", "ca", "é", "x" * 65])
def test_issue_rejects_bad_party_ids(ca_dir: Path, bad: str) -> None:
    with pytest.raises(CertError, match="invalid party id"):
        issue(ca_dir, bad)


def test_expired_certificate_is_detected(ca_dir: Path) -> None:
    now = dt.datetime.now(dt.timezone.utc)
    files = issue(
        ca_dir, "old", not_before=now - dt.timedelta(days=30), not_after=now - dt.timedelta(days=1)
    )
    pem = files.cert.read_bytes()
    assert party_id_from_cert(pem) == "old"
    with pytest.raises(CertError, match="expired on"):
        verify_party_cert(pem, files.ca_cert.read_bytes())
    with pytest.raises(CertError, match="validity window is empty"):
        issue(ca_dir, "never", not_before=now, not_after=now - dt.timedelta(seconds=1))


def test_certificate_from_another_ca_is_rejected(ca_dir: Path, tmp_path: Path) -> None:
    other = init_ca(tmp_path / "other")
    pem = issue(ca_dir, "alice").cert.read_bytes()
    with pytest.raises(CertError, match="not issued by this federation's CA"):
        verify_party_cert(pem, other.cert.read_bytes())


def test_party_id_from_non_certificate() -> None:
    with pytest.raises(CertError, match="not a readable X.509 certificate"):
        party_id_from_cert(b"-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n")


def test_ca_certificate_has_no_party_identity(ca_dir: Path) -> None:
    with pytest.raises(CertError, match="0 'vfl://party/<id>' SAN URIs"):
        party_id_from_cert((ca_dir / "ca.crt").read_bytes())


def peer_der(tls: ssl.SSLSocket) -> bytes:
    der = tls.getpeercert(binary_form=True)
    assert der is not None, "the peer presented no certificate"
    return der


def test_mutual_tls_handshake_identifies_the_client(ca_dir: Path) -> None:
    # Prepare: a party server requiring client certificates, the coordinator as client
    server_files, client_files = issue(ca_dir, "party-b"), issue(ca_dir, "coordinator")
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=server_files.ca_cert)
    server_ctx.load_cert_chain(server_files.cert, server_files.key)
    server_ctx.verify_mode = ssl.CERT_REQUIRED
    client_ctx = ssl.create_default_context(cafile=client_files.ca_cert)
    client_ctx.load_cert_chain(client_files.cert, client_files.key)
    listener = socket.create_server(("127.0.0.1", 0))
    seen: dict[str, str] = {}

    def serve() -> None:
        conn, _ = listener.accept()
        with server_ctx.wrap_socket(conn, server_side=True) as tls:
            seen["client"] = party_id_from_cert(peer_der(tls))
            tls.sendall(b"ok")

    thread = threading.Thread(target=serve)
    thread.start()
    # Execute
    with socket.create_connection(listener.getsockname()) as raw:
        with client_ctx.wrap_socket(raw, server_hostname="localhost") as tls:
            server_id = party_id_from_cert(peer_der(tls))
            assert tls.recv(2) == b"ok"
    thread.join(timeout=10)
    listener.close()
    # Assert
    assert (seen["client"], server_id) == ("coordinator", "party-b")
