"""The server side: making servers, binding them (with mutual TLS), parsing requests.

Party daemons serve on thread pools (`make_server`, one pool per plane:
`rpc.planes`); the coordinator serves on `grpc.aio`
(`make_aio_server`), so that clients following jobs hold no thread. Both limit messages to
`MAX_MESSAGE_BYTES`, as channels do, and answer a request that does not parse with
INVALID_ARGUMENT naming its message type (`ParseCheck`, `AioParseCheck`; gRPC's own answer
is INTERNAL "Exception deserializing request!"). A server bound with TLS requires a client
certificate from the federation CA, and serves rotated certificate files without a restart.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable
from concurrent import futures
from typing import Any

import grpc
from vfl.rpc.dial import MAX_MESSAGE_BYTES
from vfl.rpc.identity import Tls, watch
from vfl.rpc.planes import HandlerCache, PlaneRouter
from vfl.secure.pki.rotation import IdentityPem, IdentityWatch

_SERVER_OPTIONS: list[tuple[str, Any]] = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.so_reuseport", 0),
    # tolerate client keepalive pings on long idle watches
    ("grpc.http2.min_recv_ping_interval_without_data_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
]


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

    (gRPC's own answer is INTERNAL "Exception deserializing request!".) A method's wrapped
    handler is made once, not at every call (`HandlerCache`).
    """

    def __init__(self) -> None:
        self._wrapped = HandlerCache()

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None or handler.request_deserializer is None:
            return handler
        method = handler_call_details.method
        return self._wrapped.get(method, handler, lambda: _parse_checked(handler, method))


def _parse_checked(handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
    """`handler`, answering a request that does not parse with INVALID_ARGUMENT."""
    parse = _lenient(handler.request_deserializer, method)
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


def make_server(max_workers: int = 16, router: PlaneRouter | None = None) -> grpc.Server:
    """A thread-pool server: each call in progress holds one of `max_workers` threads, or
    one of its plane's (`router`: calls served on pools of their own, `rpc.planes`)."""
    interceptors: tuple[grpc.ServerInterceptor, ...] = (ParseCheck(),)
    if router is not None:
        interceptors = (router, *interceptors)  # first: it wraps the others' handlers
    return grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="rpc-control"),
        interceptors=interceptors,
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
