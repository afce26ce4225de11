"""A federation CA and party certificates for mutual TLS (`vfl certs`).

Directory layout (one directory per federation)::

    ca.key, ca.crt               the federation CA: EC P-256, valid 10 years
    <party_id>.key, .crt         one pair per party, and for the coordinator ("coordinator")

A party certificate names its party id twice, and `party_id_from_cert` requires both to
agree: subject CN=<party_id> and SAN URI `vfl://party/<party_id>`. It also carries DNS
and IP SANs (default localhost and 127.0.0.1) and both serverAuth and clientAuth, so one
certificate serves a daemon's server and its outgoing calls. Private keys are
unencrypted PKCS#8 PEM (daemons start unattended) written with mode 0600; protect the
directory. Party ids are 1-64 characters of [A-Za-z0-9._-] starting with a letter or
digit; "ca" is reserved. Errors: `CertError` (a `SecureError`).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from vfl.secure.errors import SecureError

URI_PREFIX = "vfl://party/"
DEFAULT_HOSTS = ("localhost", "127.0.0.1")  # every certificate's names besides its own
CA_DAYS = 3650
_PARTY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_RESERVED = {"ca"}
_SKEW = dt.timedelta(minutes=5)
RENEW_HINT = (
    "renew it: `vfl certs request` in the organisation's folder, `vfl certs sign` at the "
    "CA, then put the new certificate in place (a running daemon switches to it)"
)


class CertError(SecureError):
    """A CA or certificate is missing, invalid, expired, or would be overwritten."""


@dataclass(frozen=True)
class CaFiles:
    cert: Path
    key: Path


@dataclass(frozen=True)
class PartyFiles:
    """What a TLS server or client of one party needs: the CA, its certificate and key."""

    ca_cert: Path
    cert: Path
    key: Path


def check_party_id(party_id: str) -> str:
    """Return `party_id` if it is a valid certificate identity.

    Raises:
        CertError: wrong characters or length, or the reserved name "ca".
    """
    if not _PARTY_ID.fullmatch(party_id) or party_id.lower() in _RESERVED:
        raise CertError(
            f"invalid party id {party_id!r}: use 1-64 characters of [A-Za-z0-9._-] starting "
            'with a letter or digit ("ca" is reserved)'
        )
    return party_id


def ca_files(directory: str | Path) -> CaFiles:
    root = Path(directory)
    return CaFiles(cert=root / "ca.crt", key=root / "ca.key")


def init_ca(
    directory: str | Path,
    *,
    force: bool = False,
    days: int = CA_DAYS,
    name: str = "VFL federation CA",
) -> CaFiles:
    """Create the federation CA in `directory` (created if absent).

    Raises:
        CertError: a CA already exists there and `force` is False, or `days` < 1.
    """
    files = ca_files(directory)
    if not force and (files.cert.exists() or files.key.exists()):
        raise CertError(
            f"a CA already exists in {files.cert.parent}; pass force=True to replace it, "
            "which invalidates every certificate it issued"
        )
    if days < 1:
        raise CertError(f"CA validity must be at least 1 day, got {days}")
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    start = dt.datetime.now(dt.timezone.utc) - _SKEW
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        _builder(subject, subject, key.public_key(), start, start + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(ca=True), critical=True)
        .add_extension(ski, critical=False)
        .sign(key, hashes.SHA256())
    )
    files.cert.parent.mkdir(parents=True, exist_ok=True)
    write_file(files.key, key_pem(key), 0o600)
    write_file(files.cert, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return files


def issue(
    directory: str | Path,
    party_id: str,
    days: int = 365,
    hosts: Sequence[str] = ("localhost", "127.0.0.1"),
    *,
    not_before: dt.datetime | None = None,
    not_after: dt.datetime | None = None,
    force: bool = False,
) -> PartyFiles:
    """Issue `<party_id>.key/.crt` signed by the CA in `directory`.

    Validity runs from `not_before` (default: now minus 5 minutes of clock skew) to
    `not_after` (default: `days` later); set both in the past to make an expired cert.

    Raises:
        CertError: invalid party id; no CA in `directory`; the party's files exist and
            `force` is False; an empty or inverted validity window.
    """
    check_party_id(party_id)
    ca_cert, ca_key = load_ca(directory)
    root = Path(directory)
    files = PartyFiles(root / "ca.crt", root / f"{party_id}.crt", root / f"{party_id}.key")
    if not force and (files.cert.exists() or files.key.exists()):
        raise CertError(f"{files.cert} already exists; pass force=True to re-issue it")
    start = not_before or dt.datetime.now(dt.timezone.utc) - _SKEW
    end = not_after or start + dt.timedelta(days=days)
    if end <= start:
        raise CertError(f"certificate validity window is empty: {start} .. {end}")
    key = ec.generate_private_key(ec.SECP256R1())
    cert = sign_party_cert(ca_cert, ca_key, party_id, key.public_key(), hosts, start, end)
    write_file(files.key, key_pem(key), 0o600)
    write_file(files.cert, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return files


def sign_party_cert(
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    party_id: str,
    public_key: ec.EllipticCurvePublicKey,
    hosts: Sequence[str],
    start: dt.datetime,
    end: dt.datetime,
) -> x509.Certificate:
    """A certificate for `party_id`'s `public_key`, signed by the CA: CN and SAN URI name
    the party, `hosts` become DNS/IP SANs, usable as TLS server and client."""
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, party_id)])
    ca_ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    usages = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    return (
        _builder(subject, ca_cert.subject, public_key, start, end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(ca=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.SubjectAlternativeName(_names(party_id, hosts)), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), False
        )
        .sign(ca_key, hashes.SHA256())
    )


def party_id_from_cert(data: bytes | str) -> str:
    """The party id of a PEM (or DER) certificate, e.g. a gRPC peer's `x509_pem_cert`.

    Raises:
        CertError: not a certificate; no single `vfl://party/` SAN URI; its id differs
            from the subject CN or is not a valid party id.
    """
    cert = load_cert(data)
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        san = x509.SubjectAlternativeName([])
    uris = [
        u
        for u in san.get_values_for_type(x509.UniformResourceIdentifier)
        if u.startswith(URI_PREFIX)
    ]
    if len(uris) != 1:
        raise CertError(f"certificate has {len(uris)} '{URI_PREFIX}<id>' SAN URIs, needs one")
    party_id = uris[0][len(URI_PREFIX) :]
    common = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    if common and common != [party_id]:
        raise CertError(f"certificate CN {common} disagrees with its SAN party id {party_id!r}")
    return check_party_id(party_id)


def verify_party_cert(data: bytes | str, ca_pem: bytes | str, at: dt.datetime | None = None) -> str:
    """Check that a certificate is signed by this CA and valid at `at` (default now);
    return its party id.

    Raises:
        CertError: not issued by this CA, not yet valid, expired, or no valid party id.
    """
    cert, ca = load_cert(data), load_cert(ca_pem)
    try:
        cert.verify_directly_issued_by(ca)
    except Exception as exc:  # ValueError, TypeError or InvalidSignature
        raise CertError("certificate was not issued by this federation's CA") from exc
    now = at or dt.datetime.now(dt.timezone.utc)
    if now < cert.not_valid_before_utc:
        raise CertError(f"certificate is not valid before {cert.not_valid_before_utc}")
    if now > cert.not_valid_after_utc:
        raise CertError(f"certificate expired on {cert.not_valid_after_utc}; {RENEW_HINT}")
    return party_id_from_cert(data)


def check_key_pair(cert_pem: bytes, key_pem_bytes: bytes) -> None:
    """Check that a PEM private key belongs to a PEM certificate.

    Raises:
        CertError: the key is unreadable or encrypted, or belongs to another certificate.
    """
    try:
        private = serialization.load_pem_private_key(key_pem_bytes, password=None)
    except (ValueError, TypeError) as exc:
        raise CertError(f"not an unencrypted PEM private key: {exc}") from None
    fmt = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    public = load_cert(cert_pem).public_key()
    if private.public_key().public_bytes(*fmt) != public.public_bytes(*fmt):
        raise CertError("the key does not belong to the certificate")


def load_ca(directory: str | Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    files = ca_files(directory)
    if not files.cert.is_file() or not files.key.is_file():
        raise CertError(f"no CA in {files.cert.parent}; run init_ca() (`vfl certs init`) first")
    try:
        key = serialization.load_pem_private_key(files.key.read_bytes(), password=None)
    except (ValueError, TypeError) as exc:
        raise CertError(f"{files.key} is not a readable unencrypted PEM key: {exc}") from exc
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise CertError(f"{files.key} is not an EC private key")
    return load_cert(files.cert.read_bytes()), key


def load_cert(data: bytes | str) -> x509.Certificate:
    raw = data.encode() if isinstance(data, str) else bytes(data)
    try:
        if raw.lstrip().startswith(b"-----BEGIN"):
            return x509.load_pem_x509_certificate(raw)
        return x509.load_der_x509_certificate(raw)
    except ValueError as exc:
        raise CertError(f"not a readable X.509 certificate: {exc}") from exc


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    start: dt.datetime,
    end: dt.datetime,
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
    )


def _key_usage(ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=not ca,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def _names(party_id: str, hosts: Sequence[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = [x509.UniformResourceIdentifier(URI_PREFIX + party_id)]
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def write_file(path: Path, data: bytes, mode: int) -> None:
    """Write atomically with `mode` (set before any byte is written)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as handle:
        os.fchmod(handle.fileno(), mode)
        handle.write(data)
    os.replace(tmp, path)
