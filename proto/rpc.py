"""gRPC plumbing shared by both daemons and the CLI: message limits, dialing, serving.

Message sizes are set explicitly on both sides (DESIGN.md §2): the data plane streams
envelopes in 1 MiB chunks, so no single gRPC message needs more than `MAX_MESSAGE_BYTES`.
"""

from __future__ import annotations

import json
from concurrent import futures
from dataclasses import dataclass

import grpc

CHUNK_BYTES = 1 << 20
MAX_MESSAGE_BYTES = 8 << 20
MAX_ENVELOPE_BYTES = 1 << 30

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


@dataclass(frozen=True)
class TlsFiles:
    """PEM files for mutual TLS: the federation CA, this process's certificate and key."""

    ca: str
    cert: str
    key: str


def channel_options() -> list[tuple[str, object]]:
    return [
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.enable_retries", 1),
        ("grpc.service_config", _RETRY_POLICY),
        ("grpc.keepalive_time_ms", 30_000),
    ]


def _read(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def dial(address: str, tls: TlsFiles | None = None) -> grpc.Channel:
    """Open a client channel to `address` (host:port), with mutual TLS if `tls` is given."""
    if tls is None:
        return grpc.insecure_channel(address, options=channel_options())
    creds = grpc.ssl_channel_credentials(
        root_certificates=_read(tls.ca),
        private_key=_read(tls.key),
        certificate_chain=_read(tls.cert),
    )
    return grpc.secure_channel(address, creds, options=channel_options())


def make_server(max_workers: int = 16) -> grpc.Server:
    return grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers),
        options=[
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.so_reuseport", 0),
        ],
    )


def bind(server: grpc.Server, address: str, tls: TlsFiles | None = None) -> int:
    """Bind `address` (port 0 lets the OS pick) and return the bound port.

    Raises:
        RuntimeError: the address cannot be bound.
    """
    if tls is None:
        port = server.add_insecure_port(address)
    else:
        creds = grpc.ssl_server_credentials(
            [(_read(tls.key), _read(tls.cert))],
            root_certificates=_read(tls.ca),
            require_client_auth=True,
        )
        port = server.add_secure_port(address, creds)
    if port == 0:
        raise RuntimeError(f"cannot listen on '{address}': is the port in use or the host wrong?")
    return port


def host_of(address: str) -> str:
    return address.rsplit(":", 1)[0]
