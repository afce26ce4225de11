"""Certificates for separate organisations: a signing request out, a certificate back, the
private key never moves (`vfl certs request` / `vfl certs sign`).

    organisation                          CA operator
    request(DIR, "plant")
      DIR/plant.key (0600, stays)
      DIR/plant.csr  ──────────────────►  sign(CA_DIR, plant.csr)
                                            checks the request's signature (the requester
                                            holds the key) and its party id
      DIR/plant.crt, DIR/ca.crt  ◄───────   writes plant.crt and a copy of ca.crt

DIR is then the organisation's `--tls DIR`. The CA decides what it signs: the party id
(CN and SAN `vfl://party/<id>`, as `secure.pki.certs`), the id as a DNS name, localhost and
127.0.0.1, plus the DNS names and IPs the request asks for (`--host`). A renewal is the same
two steps with `force=True` (a new key), or `sign` of the old request again (same key).
Errors: `CertError`.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from vfl.secure.pki.certs import (
    DEFAULT_HOSTS,
    URI_PREFIX,
    CertError,
    PartyFiles,
    ca_files,
    check_party_id,
    key_pem,
    load_ca,
    sign_party_cert,
    write_file,
)

_SKEW = dt.timedelta(minutes=5)


@dataclass(frozen=True)
class RequestFiles:
    """What `request` wrote: the private key (keep it) and the request (send it)."""

    key: Path
    csr: Path


@dataclass(frozen=True)
class Signed:
    """What `sign` wrote (hand both back) and what it signed."""

    cert: Path
    ca_cert: Path
    party_id: str
    hosts: tuple[str, ...]
    not_after: dt.datetime


def request(
    directory: str | Path, party_id: str, hosts: tuple[str, ...] = (), *, force: bool = False
) -> RequestFiles:
    """Make `<party_id>.key` (mode 0600) and `<party_id>.csr` in `directory` (created 0700).

    Raises:
        CertError: invalid party id or host; the key exists and `force` is False (a new
            key replaces the one the current certificate belongs to).
    """
    check_party_id(party_id)
    root = Path(directory)
    files = RequestFiles(root / f"{party_id}.key", root / f"{party_id}.csr")
    if files.key.exists() and not force:
        raise CertError(
            f"{files.key} already exists; send {files.csr.name} to the CA again to renew with "
            "the same key, or pass --force for a new key"
        )
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.UniformResourceIdentifier(URI_PREFIX + party_id), *_host_names(hosts)]
    csr = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, party_id)]))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(key, hashes.SHA256())
    )
    write_file(files.key, key_pem(key), 0o600)
    write_file(files.csr, csr.public_bytes(serialization.Encoding.PEM), 0o644)
    return files


def sign(
    ca_directory: str | Path,
    csr_path: str | Path,
    out: str | Path | None = None,
    days: int = 365,
    *,
    not_after: dt.datetime | None = None,
) -> Signed:
    """Sign the request at `csr_path` with the CA in `ca_directory`; write `<id>.crt` and a
    copy of `ca.crt` to `out` (default: the request's folder).

    Raises:
        CertError: no CA; the file is not a request, its signature does not verify, or it
            names no valid party id; `days` < 1 or `not_after` in the past.
    """
    ca_cert, ca_key = load_ca(ca_directory)
    csr = _load_request(Path(csr_path))
    party_id = _requested_party(csr)
    hosts = tuple(dict.fromkeys([party_id, *DEFAULT_HOSTS, *_requested_hosts(csr)]))
    start = dt.datetime.now(dt.timezone.utc) - _SKEW
    end = not_after or start + dt.timedelta(days=days)
    if end <= start + _SKEW:
        raise CertError(f"certificate validity must end in the future, got {end}")
    public_key = csr.public_key()
    if not isinstance(public_key, ec.EllipticCurvePublicKey):
        raise CertError(f"{Path(csr_path).name}: the request's key is not an EC key")
    cert = sign_party_cert(ca_cert, ca_key, party_id, public_key, hosts, start, end)
    dest = Path(out) if out is not None else Path(csr_path).parent
    dest.mkdir(parents=True, exist_ok=True)
    files = PartyFiles(dest / "ca.crt", dest / f"{party_id}.crt", dest / f"{party_id}.key")
    write_file(files.cert, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    if files.ca_cert.resolve() != ca_files(ca_directory).cert.resolve():
        write_file(files.ca_cert, ca_cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return Signed(files.cert, files.ca_cert, party_id, hosts, cert.not_valid_after_utc)


def _load_request(path: Path) -> x509.CertificateSigningRequest:
    try:
        csr = x509.load_pem_x509_csr(path.read_bytes())
    except FileNotFoundError:
        raise CertError(
            f"{path} does not exist; the organisation makes it with `vfl certs request --party ID`"
        ) from None
    except ValueError as exc:
        raise CertError(f"{path.name} is not a PEM certificate signing request: {exc}") from None
    if not csr.is_signature_valid:
        raise CertError(f"{path.name}: the request's signature does not verify; ask for a new one")
    return csr


def _requested_party(csr: x509.CertificateSigningRequest) -> str:
    common = [a.value for a in csr.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    if len(common) != 1 or not isinstance(common[0], str):
        raise CertError(
            "the request names no party (one subject CN); make it with vfl certs request"
        )
    party_id = check_party_id(common[0])
    uris = [u for u in _san(csr).get_values_for_type(x509.UniformResourceIdentifier)]
    if any(u != URI_PREFIX + party_id for u in uris if u.startswith(URI_PREFIX)):
        raise CertError(f"the request's SAN URI disagrees with its party id {party_id!r}")
    return party_id


def _requested_hosts(csr: x509.CertificateSigningRequest) -> list[str]:
    san = _san(csr)
    ips = [str(ip) for ip in san.get_values_for_type(x509.IPAddress)]
    return [*san.get_values_for_type(x509.DNSName), *ips]


def _san(csr: x509.CertificateSigningRequest) -> x509.SubjectAlternativeName:
    try:
        return csr.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return x509.SubjectAlternativeName([])


def _host_names(hosts: tuple[str, ...]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            try:
                names.append(x509.DNSName(host))
            except ValueError as exc:
                raise CertError(f"--host {host!r} is not a DNS name or IP address: {exc}") from None
    return names
