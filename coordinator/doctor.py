"""`vfl doctor`: check a federation end to end before a job, from the operator's seat.

The checks, in order (`diagnose`):

1. the coordinator answers its gRPC health check, and (with TLS) its certificate;
2. the coordinator's `CheckFederation`: every registered party answers it, with its
   version and clock; every party pushes a `ping` envelope to every other on the data
   plane (`coordinator.federation`);
3. for each party, from here: its certificate (at its registered address: issued by this
   operator's federation CA, naming the party, not expiring within `cert_days`), its
   health check; then versions (all the coordinator's) and clocks (within `max_skew_s`
   of the coordinator's; the coordinator's within that of this machine's).

Each problem is one `Finding` naming the party, the check and the fix. A party that
fails its certificate or health check gets no further findings, and no peer's failed
ping to it is reported again: one cause, one line.
"""

from __future__ import annotations

import datetime as dt
import socket
import ssl
import time
from dataclasses import dataclass

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from grpc_health.v1 import health_pb2, health_pb2_grpc
from vfl.coordinator.client import CoordinatorClient
from vfl.proto import coordinator_pb2 as pb
from vfl.rpc import COORDINATOR_ID, VERSION, dial, explain, host_of
from vfl.secure.pki.certs import CertError, PartyFiles, verify_party_cert

HEALTH_TIMEOUT_S = 5.0
ISSUE = "vfl certs issue CA_DIR --party {id} --bundle DIR --force"
NO_HANDSHAKE = "no TLS handshake"


@dataclass(frozen=True)
class Finding:
    subject: str  # "coordinator" or a party id
    check: str  # health, certificate, version, clock, data plane
    ok: bool
    detail: str
    fix: str = ""

    def line(self) -> str:
        if self.ok:
            return f"ok    {self.subject:<12} {self.check:<12} {self.detail}"
        return f"FAIL  {self.subject:<12} {self.check:<12} {self.detail}; fix: {self.fix}"


@dataclass(frozen=True)
class Limits:
    max_skew_s: float = 5.0  # clocks further apart fail
    cert_days: int = 14  # certificates expiring sooner fail


def diagnose(address: str, tls: PartyFiles | None, limits: Limits) -> list[Finding]:
    """Every check of the module doc against the coordinator at `address`."""
    found = [_health(COORDINATOR_ID, address, tls, COORDINATOR_START)]
    if tls is not None and found[0].ok:
        found.append(_certificate(COORDINATOR_ID, address, tls, limits))
    if not all(f.ok for f in found):
        return found
    with CoordinatorClient(address, tls) as client:
        asked = time.time()  # the coordinator stamps its clock as the request arrives
        try:
            fed = client.check_federation()
        except grpc.RpcError as exc:
            why = explain(exc, address, tls is not None, COORDINATOR_ID)
            return [*found, Finding(COORDINATOR_ID, "parties", False, why, ACCESS_FIX)]
    found += _coordinator_versions(fed, asked, limits)
    failed: set[str] = set()
    for party in fed.parties:
        mine = _party(party, fed, tls, limits)
        if any(not f.ok and f.check in ("health", "certificate") for f in mine):
            failed.add(party.party_id)
        found += mine
    for party in fed.parties:
        if party.party_id not in failed:
            found += _data_plane(party, fed, failed)
    if not fed.parties:
        found.append(Finding(COORDINATOR_ID, "parties", False, "no party registered", START))
    return found


COORDINATOR_START = (
    "start it (`vfl coordinator serve --db jobs.sqlite --listen HOST:PORT`) or pass "
    "--coordinator HOST:PORT (env VFL_COORDINATOR)"
)
START = "start each party (`vfl party serve --config PARTY.yaml`); it registers by itself"
ACCESS_FIX = "run `vfl doctor` with an operator's certificate (--tls DIR --identity admin)"


def _health(subject: str, address: str, tls: PartyFiles | None, fix: str) -> Finding:
    request = health_pb2.HealthCheckRequest(service="")
    try:
        with dial(address, tls, expect=subject) as channel:
            resp = health_pb2_grpc.HealthStub(channel).Check(request, timeout=HEALTH_TIMEOUT_S)
    except grpc.RpcError as exc:
        why = explain(exc, address, tls is not None, subject)
        detail = why if address in why else f"{address}: {why}"
        return Finding(subject, "health", False, detail, fix)
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)
    if resp.status != health_pb2.HealthCheckResponse.SERVING:
        return Finding(subject, "health", False, f"{address} is {status}", "wait, or restart it")
    return Finding(subject, "health", True, f"{address} {status}")


def peer_certificate(address: str, tls: PartyFiles) -> bytes:
    """The certificate (PEM) the daemon at `address` presents in a TLS handshake, read
    without checking it (this client presents its own, as the daemon requires).

    Raises:
        OSError: no TLS server answers at `address`.
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE  # checked by the caller
    ctx.load_cert_chain(str(tls.cert), str(tls.key))
    ctx.set_alpn_protocols(["h2"])
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=HEALTH_TIMEOUT_S) as sock:
        with ctx.wrap_socket(sock, server_hostname=host_of(address)) as conn:
            der = conn.getpeercert(binary_form=True)
    if der is None:
        raise OSError(f"{address} presented no certificate")
    cert = x509.load_der_x509_certificate(der)
    return cert.public_bytes(serialization.Encoding.PEM)


def _certificate(subject: str, address: str, tls: PartyFiles, limits: Limits) -> Finding:
    fix = f"issue '{subject}' its own certificate ({ISSUE.format(id=subject)}) and restart it"
    try:
        pem = peer_certificate(address, tls)
    except OSError as exc:
        detail = f"{NO_HANDSHAKE} at {address}: {exc}"
        return Finding(subject, "certificate", False, detail, fix)
    try:
        named = verify_party_cert(pem, tls.ca_cert.read_bytes())
    except CertError as exc:
        detail = f"the daemon at {address}: {exc}"
        return Finding(subject, "certificate", False, detail, fix + ", from this federation's CA")
    if named != subject:
        detail = f"the daemon at {address} presents a certificate for '{named}', not '{subject}'"
        where = (
            "check the address it registered (its --listen/--advertise) and "
            if subject != COORDINATOR_ID
            else ""
        )
        return Finding(subject, "certificate", False, detail, where + fix)
    left = x509.load_pem_x509_certificate(pem).not_valid_after_utc - dt.datetime.now(
        dt.timezone.utc
    )
    if left < dt.timedelta(days=limits.cert_days):
        detail = f"expires in {left.days} days (under {limits.cert_days})"
        return Finding(subject, "certificate", False, detail, fix.replace("issue", "re-issue", 1))
    return Finding(subject, "certificate", True, f"names '{named}', our CA, {left.days} days left")


def _coordinator_versions(
    fed: pb.CheckFederationResponse, here: float, limits: Limits
) -> list[Finding]:
    out = []
    if fed.version != VERSION:
        detail = f"the coordinator runs {fed.version}, this CLI {VERSION}"
        out.append(Finding(COORDINATOR_ID, "version", False, detail, SAME_RELEASE))
    else:
        out.append(Finding(COORDINATOR_ID, "version", True, f"{fed.version}, as this CLI"))
    out.append(_clock(COORDINATOR_ID, fed.time - here, "this machine", limits))
    return out


SAME_RELEASE = "install the same vfl release at the coordinator, every party and the operator"


def _clock(subject: str, skew: float, against: str, limits: Limits) -> Finding:
    if abs(skew) > limits.max_skew_s:
        detail = f"{skew:+.1f} s from {against} (over {limits.max_skew_s:g} s)"
        return Finding(subject, "clock", False, detail, "synchronise its clock (NTP: chrony)")
    return Finding(subject, "clock", True, f"{skew:+.2f} s from {against}")


def _party(
    party: pb.FederationParty,
    fed: pb.CheckFederationResponse,
    tls: PartyFiles | None,
    limits: Limits,
) -> list[Finding]:
    """A party's own checks: certificate and health first; the rest only if they pass."""
    pid, address = party.party_id, party.address
    fix = f"start '{pid}' again (`vfl party serve --config {pid}.yaml`); it registers by itself"
    out = []
    if tls is not None:  # a daemon that does not answer at all is the health check's
        cert = _certificate(pid, address, tls, limits)
        if not cert.ok and not cert.detail.startswith(NO_HANDSHAKE):
            return [cert]
        out.append(cert)
    health = _health(pid, address, tls, fix)
    if not health.ok:
        return [health]
    out.append(health)
    if party.error:
        detail = f"the coordinator cannot reach it at {address}: {party.error}"
        out.append(Finding(pid, "registered", False, detail, "check the coordinator's network"))
        return out
    if party.version != fed.version:
        detail = f"runs {party.version}, the coordinator {fed.version}"
        out.append(Finding(pid, "version", False, detail, SAME_RELEASE))
    else:
        out.append(Finding(pid, "version", True, f"{party.version}, as the coordinator"))
    out.append(_clock(pid, party.time - party.asked_at, "the coordinator", limits))
    return out


def _data_plane(
    party: pb.FederationParty, fed: pb.CheckFederationResponse, failed: set[str]
) -> list[Finding]:
    """One finding per peer `party` could not push to (peers that failed already aside),
    or one for all it reached."""
    registered = {p.party_id: p.address for p in fed.parties}
    out, reached = [], []
    for check in party.peers:
        if check.party_id in failed:
            continue
        if not check.error:
            reached.append(f"{check.party_id} {check.seconds * 1000:.0f} ms")
            continue
        fix = (
            f"open {check.address} to '{party.party_id}' (firewall, port mapping) or set "
            f"'{check.party_id}'s --advertise to an address '{party.party_id}' reaches"
        )
        if check.address != registered.get(check.party_id):
            fix = (
                f"'{party.party_id}'s config lists '{check.party_id}' at {check.address} under "
                f"`peers:` (registered: {registered.get(check.party_id)}); correct or drop it"
            )
        detail = f"push to '{check.party_id}' at {check.address} failed: {check.error}"
        out.append(Finding(party.party_id, "data plane", False, detail, fix))
    if reached and not out:
        out.append(Finding(party.party_id, "data plane", True, "pushed to " + ", ".join(reached)))
    return out
