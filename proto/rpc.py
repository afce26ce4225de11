"""gRPC plumbing shared by both daemons and the CLI: message limits, dialing, serving, TLS.

Message sizes are set explicitly on both sides (docs/architecture.md, Data plane): the data
plane streams envelopes in 1 MiB chunks, so no single gRPC message needs more than
`MAX_MESSAGE_BYTES`; a larger one gets RESOURCE_EXHAUSTED.

Mutual TLS: a server bound with `PartyFiles` requires a client certificate from the
federation CA; a client dialing with `PartyFiles` checks the server's certificate against the
same CA and, with `expect=<party id>`, that it names that party (the id is the TLS target
name, and `vfl certs issue` puts it in the certificate's DNS names, so dialing by IP or
service name works). Servicers ask `check_caller` whether the caller's certificate names
the party a request acts for; on an insecure server there are no identities to check.
`explain` turns a failed call (handshake, size) into a message that names cause and fix.

Party daemons serve on a thread pool (`make_server`); the coordinator serves on `grpc.aio`
(`make_aio_server`), so that clients following jobs hold no thread. Every servicer helper
that answers with a status has both forms, sharing one decision: `check_caller` /
`check_caller_async`, `call_with_status` / `call_with_status_async`, and `ParseCheck` /
`AioParseCheck`.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import inspect
import json
import logging
import threading
from collections.abc import Awaitable, Callable, Sequence
from concurrent import futures
from typing import Any, TypeVar

import grpc
from vfl.proto import party_pb2_grpc
from vfl.secure.pki.certs import RENEW_HINT, CertError, PartyFiles, party_id_from_cert
from vfl.secure.pki.rotation import IdentityPem, IdentityWatch

log = logging.getLogger(__name__)
T = TypeVar("T")
Tls = PartyFiles | IdentityWatch  # a process's TLS identity: its files, or them watched


def _package_version() -> str:
    try:
        return importlib.metadata.version("vfl-platform")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed: pip install -e .)"


Codes = Sequence[tuple[type[Exception], grpc.StatusCode]]  # error type -> status, first match
Problem = tuple[grpc.StatusCode, str]  # the status a call is answered with

CHUNK_BYTES = 1 << 20
MAX_MESSAGE_BYTES = 8 << 20
MAX_ENVELOPE_BYTES = 1 << 30
COORDINATOR_ID = "coordinator"  # the identity in the coordinator's certificate
VERSION = _package_version()  # this software's version, as daemons report it (vfl doctor)
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


def channel_options() -> list[tuple[str, object]]:
    return [
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.enable_retries", 1),
        ("grpc.service_config", _RETRY_POLICY),
        # a daemon that was down for minutes is dialled again within seconds of its
        # return, not after gRPC's default back-off of up to two minutes
        ("grpc.max_reconnect_backoff_ms", MAX_RECONNECT_BACKOFF_MS),
    ]


def watch(tls: Tls | None) -> IdentityWatch | None:
    """`tls` as an `IdentityWatch` (files are read now), None for an insecure process."""
    if tls is None or isinstance(tls, IdentityWatch):
        return tls
    return IdentityWatch(tls)


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


class _Undecodable:
    """Stands in for a request that did not parse; the handler answers INVALID_ARGUMENT."""

    def __init__(self, message: str) -> None:
        self.message = message


def _lenient(parse: Callable[[bytes], Any], method: str) -> Callable[[bytes], Any]:
    owner = getattr(parse, "__self__", None)
    name = getattr(getattr(owner, "DESCRIPTOR", None), "full_name", "request message")

    def lenient(raw: bytes) -> Any:
        try:
            return parse(raw)
        except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError and friends
            return _Undecodable(
                f"{method}: the request is not a valid {name} ({exc}); "
                "client and server must use the same proto/*.proto"
            )

    return lenient


def _checked(request: Any, context: grpc.ServicerContext) -> Any:
    if isinstance(request, _Undecodable):
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.message)
    return request


_HANDLERS = {
    (False, False): grpc.unary_unary_rpc_method_handler,
    (False, True): grpc.unary_stream_rpc_method_handler,
    (True, False): grpc.stream_unary_rpc_method_handler,
    (True, True): grpc.stream_stream_rpc_method_handler,
}


class ParseCheck(grpc.ServerInterceptor):
    """Answer a request that does not parse with INVALID_ARGUMENT naming its message type.

    (gRPC's own answer is INTERNAL "Exception deserializing request!".)
    """

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None or handler.request_deserializer is None:
            return handler
        parse = _lenient(handler.request_deserializer, handler_call_details.method)
        if handler.request_streaming:
            inner = handler.stream_unary or handler.stream_stream

            def behavior(requests, context):
                return inner((_checked(r, context) for r in requests), context)
        else:
            inner = handler.unary_unary or handler.unary_stream

            def behavior(request, context):
                return inner(_checked(request, context), context)

        kind = (handler.request_streaming, handler.response_streaming)
        return _HANDLERS[kind](behavior, parse, handler.response_serializer)


async def _checked_async(request: Any, context: grpc.aio.ServicerContext) -> Any:
    if isinstance(request, _Undecodable):
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.message)
    return request


class AioParseCheck(grpc.aio.ServerInterceptor):
    """`ParseCheck` for a `grpc.aio` server, whose handlers are coroutines or async
    generators. RPCs with a request stream keep gRPC's own answer (the coordinator has none).
    """

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None or handler.request_deserializer is None or handler.request_streaming:
            return handler
        parse = _lenient(handler.request_deserializer, handler_call_details.method)
        inner = handler.unary_stream or handler.unary_unary

        async def checked_stream(request, context):  # an async generator of responses
            responses = inner(await _checked_async(request, context), context)
            async with contextlib.aclosing(responses):  # a cancelled call closes it at once
                async for response in responses:
                    yield response

        async def checked_call(request, context):  # a coroutine (a stream: context.write)
            return await inner(await _checked_async(request, context), context)

        behavior = checked_stream if inspect.isasyncgenfunction(inner) else checked_call
        kind = (False, handler.response_streaming)
        return _HANDLERS[kind](behavior, parse, handler.response_serializer)


_SERVER_OPTIONS: list[tuple[str, Any]] = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.so_reuseport", 0),
    # tolerate client keepalive pings on long idle watches
    ("grpc.http2.min_recv_ping_interval_without_data_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
]


def make_server(max_workers: int = 16) -> grpc.Server:
    """A thread-pool server: each call in progress holds one of `max_workers` threads."""
    return grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers),
        interceptors=(ParseCheck(),),
        options=_SERVER_OPTIONS,
    )


def make_aio_server() -> grpc.aio.Server:
    """A `grpc.aio` server; create it on the event loop that will run it. Its handlers are
    coroutines: a call that waits (a job being followed) holds no thread."""
    return grpc.aio.server(interceptors=(AioParseCheck(),), options=_SERVER_OPTIONS)


def bind(server: grpc.Server | grpc.aio.Server, address: str, tls: Tls | None = None) -> int:
    """Bind `address` (port 0 lets the OS pick) and return the bound port.

    With `tls`, every new connection's handshake uses the identity's current files, so a
    rotated certificate is served without a restart (`secure.pki.rotation`).

    Raises:
        RuntimeError: the address cannot be bound.
    """
    identity = watch(tls)
    if identity is None:
        port = server.add_insecure_port(address)
    else:
        port = server.add_secure_port(address, server_credentials(identity))
    if port == 0:
        raise RuntimeError(f"cannot listen on '{address}': is the port in use or the host wrong?")
    return port


def server_credentials(identity: IdentityWatch) -> grpc.ServerCredentials:
    """Mutual-TLS server credentials that gRPC asks for changes before every handshake."""

    def config(pem: IdentityPem) -> grpc.ServerCertificateConfiguration:
        return grpc.ssl_server_certificate_configuration(
            [(pem.key, pem.cert)], root_certificates=pem.ca_cert
        )

    served = {"generation": identity.check()}

    def fetch() -> grpc.ServerCertificateConfiguration | None:
        pem = identity.current()
        if identity.generation == served["generation"]:
            return None
        served["generation"] = identity.generation
        return config(pem)

    return grpc.dynamic_ssl_server_credentials(
        config(identity.current()), fetch, require_client_authentication=True
    )


def host_of(address: str) -> str:
    return address.rsplit(":", 1)[0]


def caller_party(context: grpc.ServicerContext | grpc.aio.ServicerContext) -> str | None:
    """The party id named by the caller's certificate; None on an insecure server.

    Raises:
        CertError: a TLS caller without a certificate that names a valid party id.
    """
    auth = context.auth_context()
    if auth.get("transport_security_type") != [b"ssl"]:
        return None
    pems = auth.get("x509_pem_cert")
    if not pems:
        raise CertError("the caller presented no client certificate")
    return party_id_from_cert(pems[0])


def _identify(context: grpc.ServicerContext | grpc.aio.ServicerContext) -> str | None | Problem:
    """The caller's identity (None: insecure), or the problem that it has none."""
    try:
        return caller_party(context)
    except CertError as exc:
        return grpc.StatusCode.PERMISSION_DENIED, f"cannot identify the caller: {exc}"


async def identify_caller_async(context: grpc.aio.ServicerContext) -> str | None:
    """`caller_party`, aborting with PERMISSION_DENIED when the certificate names no party."""
    caller = _identify(context)
    if isinstance(caller, tuple):
        await context.abort(*caller)
        raise AssertionError("unreachable")  # context.abort raises
    return caller


def _caller_problem(
    context: grpc.ServicerContext | grpc.aio.ServicerContext, party: str, action: str
) -> Problem | None:
    caller = _identify(context)
    if isinstance(caller, tuple):
        return caller
    if caller is not None and not party:
        return grpc.StatusCode.INVALID_ARGUMENT, f"the request names no party ({action})"
    if caller is not None and caller != party:
        return (
            grpc.StatusCode.PERMISSION_DENIED,
            f"only party '{party}' may {action}, but the caller's certificate names party "
            f"'{caller}'; each process must use its own certificate (vfl certs issue)",
        )
    return None


def check_caller(context: grpc.ServicerContext, party: str, action: str) -> None:
    """Abort with PERMISSION_DENIED unless the caller's certificate names `party`.

    `action` completes "... may only ..." in the message, e.g. "send as party 'bank'".
    A no-op on an insecure server.
    """
    problem = _caller_problem(context, party, action)
    if problem is not None:
        context.abort(*problem)


async def check_caller_async(context: grpc.aio.ServicerContext, party: str, action: str) -> None:
    """`check_caller` for a `grpc.aio` servicer."""
    problem = _caller_problem(context, party, action)
    if problem is not None:
        await context.abort(*problem)


def explain(
    exc: grpc.RpcError, address: str, tls: bool | IdentityWatch | None, expect: str | None = None
) -> str:
    """A one-line reason for a failed call to `address`: the likely cause and the fix.

    `tls`: whether this process uses TLS; its `IdentityWatch` also lets a rejection be
    blamed on this process's own expired certificate.
    """
    code, details = exc.code(), exc.details() or ""
    who = f"party '{expect}'" if expect else f"host '{host_of(address)}'"
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than max" in details:
        return (
            f"{details}: gRPC messages are limited to {MAX_MESSAGE_BYTES} bytes; "
            "send less per call (the data plane streams envelopes in chunks)"
        )
    if code != grpc.StatusCode.UNAVAILABLE:
        return f"{code.name}: {details}"
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
    expired = tls.expired_on() if isinstance(tls, IdentityWatch) else None
    if expired is not None and ("Socket closed" in details or "handshake" in details.lower()):
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

    With TLS, a connection the server closes at once also counts: that is how a client
    sees a server reject its certificate.
    """
    details = exc.details() or ""
    return exc.code() == grpc.StatusCode.UNAVAILABLE and (
        "handshake failed" in details.lower()
        or "Hostname Verification" in details
        or (tls and "Socket closed" in details)
    )


def status_of(
    exc: Exception, codes: Codes, message: Callable[[Exception], str] | None = None
) -> Problem:
    """The status an error is answered with, with its message (or `message(error)`, what of
    it may be shown to the caller): the first matching entry of `codes`, else INTERNAL
    (logged with its traceback)."""
    shown = str(exc) if message is None else message(exc)
    for kind, code in codes:
        if isinstance(exc, kind):
            return code, shown or type(exc).__name__
    log.error("internal error", exc_info=exc)
    if message is None:
        shown = f"{type(exc).__name__}: {exc}"
    return grpc.StatusCode.INTERNAL, f"internal error: {shown}"


def call_with_status(
    context: grpc.ServicerContext,
    fn: Callable[[], T],
    codes: Codes,
    message: Callable[[Exception], str] | None = None,
) -> T:
    """Run a servicer's `fn`, turning errors into a gRPC status (`status_of`). A servicer
    never crashes."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - every error becomes a status, never a crash
        if context.code() is not None:
            raise  # already aborted (e.g. a request that does not parse)
        context.abort(*status_of(exc, codes, message))
    raise AssertionError("unreachable")  # context.abort raises


async def call_with_status_async(
    context: grpc.aio.ServicerContext, call: Awaitable[T], codes: Codes
) -> T:
    """`call_with_status` for a `grpc.aio` servicer: await `call` (e.g. work in a thread,
    `loop.run_in_executor`), turning its errors into a gRPC status (`status_of`)."""
    try:
        return await call
    except grpc.aio.AbortError:
        raise  # already aborted
    except Exception as exc:  # noqa: BLE001 - every error becomes a status, never a crash
        await context.abort(*status_of(exc, codes))
    raise AssertionError("unreachable")  # context.abort raises


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
