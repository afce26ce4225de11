"""The client side: message limits, dialing a daemon, reusing channels, explaining failures.

Message sizes are set explicitly on both sides (docs/architecture.md, Data plane): the data
plane streams envelopes in `CHUNK_BYTES` chunks, so no single gRPC message needs more than
`MAX_MESSAGE_BYTES`; a larger one gets RESOURCE_EXHAUSTED.

A client dialing with TLS checks the server's certificate against the federation CA and,
with `expect=<party id>`, that it names that party (the id is the TLS target name, and
`vfl certs issue` puts it in the certificate's DNS names, so dialing by IP or service name
works). `ChannelCache` and `PeerClients` keep one channel per peer, dialled again when the
identity rotates. `explain` turns a failed call (handshake, size) into a message that names
cause and fix; `handshake_failed` says whether retrying cannot help (a connection closed
mid-call, by a peer that died, is never taken for a rejected certificate).
"""

from __future__ import annotations

import json
import threading

import grpc
from vfl.proto import party_pb2_grpc
from vfl.rpc.identity import Tls, watch
from vfl.secure.pki.certs import RENEW_HINT
from vfl.secure.pki.rotation import IdentityWatch

# --- limits -------------------------------------------------------------------------

CHUNK_BYTES = 1 << 20  # the data plane's envelopes travel in chunks of this size
MAX_MESSAGE_BYTES = 8 << 20  # the largest gRPC message, sent or received, of any call
MAX_RECONNECT_BACKOFF_MS = 5000  # longest wait between a channel's connection attempts

_RETRY_POLICY = json.dumps(
    {
        "methodConfig": [
            {
                "name": [
                    {"service": "vfl.v1.CoordinatorService"},
                    {"service": "vfl.v1.PartyService", "method": "PrepareJob"},
                    {"service": "vfl.v1.PartyService", "method": "GetPartyInfo"},
                    {"service": "grpc.health.v1.Health"},
                ],
                "retryPolicy": {
                    "maxAttempts": 4,
                    "initialBackoff": "0.2s",
                    "maxBackoff": "2s",
                    "backoffMultiplier": 2,
                    "retryableStatusCodes": ["UNAVAILABLE"],
                },
            }
        ]
    }
)
_CA_HINT = (
    "check that both sides use certificates from the same federation CA (vfl certs) "
    "and that they have not expired"
)

# --- dialing ------------------------------------------------------------------------


def channel_options() -> list[tuple[str, object]]:
    """A client channel's options: message limits, retries, reconnect back-off."""
    return [
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.enable_retries", 1),
        ("grpc.service_config", _RETRY_POLICY),
        # a daemon that was down for minutes is dialled again within seconds of its
        # return, not after gRPC's default back-off of up to two minutes
        ("grpc.max_reconnect_backoff_ms", MAX_RECONNECT_BACKOFF_MS),
    ]


def dial(address: str, tls: Tls | None = None, expect: str | None = None) -> grpc.Channel:
    """Open a client channel to `address` (host:port), with mutual TLS if `tls` is given
    (the identity's current files: a later rotation needs a new channel, `ChannelCache`).

    With TLS and `expect`, the server's certificate must name party `expect`; without
    `expect`, it must name the host of `address` (a DNS or IP name in the certificate).
    """
    identity = watch(tls)
    if identity is None:
        return grpc.insecure_channel(address, options=channel_options())
    pem = identity.current()
    creds = grpc.ssl_channel_credentials(
        root_certificates=pem.ca_cert, private_key=pem.key, certificate_chain=pem.cert
    )
    options = channel_options()
    if expect:
        options.append(("grpc.ssl_target_name_override", expect))
    return grpc.secure_channel(address, creds, options=options)


def host_of(address: str) -> str:
    """The host of a `host:port` address."""
    return address.rsplit(":", 1)[0]


class ChannelCache:
    """One gRPC channel per (address, expected identity), dialled again with the new files
    when this process's TLS identity rotates (calls in flight finish on the old channel,
    which is closed with the cache)."""

    def __init__(self, tls: Tls | None = None) -> None:
        self.tls = watch(tls)
        self._lock = threading.Lock()
        self._channels: dict[tuple[str, str | None], grpc.Channel] = {}
        self._retired: list[grpc.Channel] = []
        self._generation = self.tls.generation if self.tls else 0
        self._closed = False

    def channel(self, address: str, expect: str | None) -> grpc.Channel:
        """The channel to `address`, whose certificate must name `expect`.

        Raises:
            ValueError: the cache is closed (as a closed gRPC channel does).
        """
        generation = self.tls.check() if self.tls else 0
        key = (address, expect)
        with self._lock:
            if self._closed:
                raise ValueError("the channels are closed")
            if generation != self._generation:
                self._retired.extend(self._channels.values())
                self._channels.clear()
                self._generation = generation
            if key not in self._channels:
                self._channels[key] = dial(address, self.tls, expect=expect)
            return self._channels[key]

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for ch in [*self._channels.values(), *self._retired]:
                ch.close()
            self._channels.clear()
            self._retired.clear()


class PeerClients(ChannelCache):
    """The channels of a daemon to its peers, shared by all its jobs."""

    def stub(self, address: str, party_id: str) -> party_pb2_grpc.PartyServiceStub:
        """A stub for party `party_id` at `address` (with TLS, its certificate must say so)."""
        return party_pb2_grpc.PartyServiceStub(self.channel(address, party_id))

    def ready(self, address: str, party_id: str, timeout: float) -> bool:
        """Wait up to `timeout` seconds for the channel to party `party_id` to connect
        (a channel that failed before waits out its reconnect back-off); True if it did."""
        future = grpc.channel_ready_future(self.channel(address, party_id))
        try:
            future.result(timeout)
        except (grpc.FutureTimeoutError, grpc.FutureCancelledError):
            future.cancel()
            return False
        return True


# --- failed calls -------------------------------------------------------------------


def explain(
    exc: grpc.RpcError, address: str, tls: bool | IdentityWatch | None, expect: str | None = None
) -> str:
    """A one-line reason for a failed call to `address`: the likely cause and the fix.

    `tls`: whether this process uses TLS; its `IdentityWatch` also lets a rejection be
    blamed on this process's own expired certificate.
    """
    code, details = exc.code(), exc.details() or ""
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than max" in details:
        return (
            f"{details}: gRPC messages are limited to {MAX_MESSAGE_BYTES} bytes; "
            "send less per call (the data plane streams envelopes in chunks)"
        )
    if code != grpc.StatusCode.UNAVAILABLE:
        return f"{code.name}: {details}"
    who = f"party '{expect}'" if expect else f"host '{host_of(address)}'"
    return _unavailable(details, address, who, tls)


def _unavailable(details: str, address: str, who: str, tls: bool | IdentityWatch | None) -> str:
    """`explain` for an UNAVAILABLE call to `address` whose certificate must name `who`."""
    if "Hostname Verification" in details:
        return (
            f"TLS handshake with {address} failed: its certificate does not name {who}; "
            "is the address right, and was the server's certificate issued for that "
            "party (vfl certs issue DIR --party ID)?"
        )
    if "WRONG_VERSION_NUMBER" in details:
        return (
            f"TLS handshake with {address} failed: the server does not speak TLS "
            "(started with --insecure?); start both sides with --tls DIR or both insecure"
        )
    if "certificate has expired" in details:
        return (
            f"TLS handshake with {address} failed: the certificate of {who} has expired; "
            f"its organisation must {RENEW_HINT}"
        )
    if _closed_mid_call(details):
        return (
            f"the connection to {who} at {address} closed during the call ({details}): its "
            "daemon stopped or the network dropped it; retry once it is back"
        )
    expired = tls.expired_on() if isinstance(tls, IdentityWatch) else None
    if expired is not None and (_closed_at_connect(details) or "handshake" in details.lower()):
        return (
            f"TLS handshake with {address} failed: this process's certificate expired on "
            f"{expired}; {RENEW_HINT}"
        )
    if "handshake" in details.lower() or "CERTIFICATE_VERIFY_FAILED" in details:
        reason = details.split("CERTIFICATE_VERIFY_FAILED:")[-1].removesuffix(": OK").strip()
        return f"TLS handshake with {address} failed ({reason}): {_CA_HINT}"
    if "Socket closed" in details and tls:
        return (
            f"TLS handshake with {address} failed: the server closed the connection, "
            f"most likely rejecting this client's certificate; {_CA_HINT}"
        )
    if "Socket closed" in details:
        return f"{address} closed the connection: if it uses TLS, pass --tls DIR"
    if "failed to connect" in details:
        return f"{address} is unreachable ({details}); is the daemon running there?"
    return details


def handshake_failed(exc: grpc.RpcError, tls: bool) -> bool:
    """True if a call failed in the TLS handshake (not transient: retrying will not help).

    With TLS, a connection the server closes while it is being set up also counts: that
    is how a client sees a server reject its certificate ("failed to connect ... Socket
    closed"). A connection that closes after it was set up ("Stream removed (Socket
    closed)": the peer died or stopped mid-call) never does.
    """
    details = exc.details() or ""
    return exc.code() == grpc.StatusCode.UNAVAILABLE and (
        "handshake failed" in details.lower()
        or "Hostname Verification" in details
        or (tls and _closed_at_connect(details))
    )


_CLOSED = ("Socket closed", "Stream removed", "Connection reset", "Broken pipe")


def _closed_mid_call(details: str) -> bool:
    """A connection that was set up closed during the call (the peer died or stopped)."""
    return "failed to connect" not in details and any(c in details for c in _CLOSED)


def _closed_at_connect(details: str) -> bool:
    """The server closed the connection before it was set up (in the TLS handshake):
    gRPC says "failed to connect to all addresses; ... Socket closed"."""
    return "Socket closed" in details and "failed to connect" in details
