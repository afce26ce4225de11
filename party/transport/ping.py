"""The data-plane probe of `vfl doctor`: one `ping` envelope pushed to each peer.

A ping travels as a job's envelopes do (the `Push` RPC, over the party's TLS channel to
the address it would use in a job, its certificate checked against the peer's id), under
the reserved job id `PING_JOB`; its payload is a `Ping` of random bytes and nothing else.
The receiving daemon answers it without a job (`party.transport.endpoint.Endpoint.admit`).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import grpc
from vfl.party.transport.grpc_channel import chunks
from vfl.proto import common_pb2
from vfl.rpc import PeerClients, explain
from vfl.secure.channel import EnvelopeHook

PING_JOB = "doctor-ping"  # never a job's id (those end in 8 hex digits)
PING_TIMEOUT_S = 5.0
PING_MAX_BYTES = 1024  # a ping is a 16-byte nonce; a larger envelope is not read


@dataclass(frozen=True)
class PingResult:
    peer: str
    address: str
    error: str  # empty: the peer took the envelope
    seconds: float


def ping_payload() -> bytes:
    return common_pb2.Payload(ping=common_pb2.Ping(nonce=os.urandom(16))).SerializeToString()


def ping_peers(
    me: str, peers: dict[str, str], clients: PeerClients, hook: EnvelopeHook
) -> list[PingResult]:
    """Push one ping to each of `peers` (id -> address); each result names what failed."""
    results = []
    for peer, address in sorted(peers.items()):
        data = ping_payload()
        tag = f"ping/{os.urandom(4).hex()}"
        began = time.monotonic()
        try:
            hook("sent", me, peer, tag, data)
            clients.stub(address, peer).Push(
                chunks(PING_JOB, tag, me, peer, data), timeout=PING_TIMEOUT_S
            )
            error = ""
        except grpc.RpcError as exc:
            error = explain(exc, address, clients.tls is not None, peer)
        results.append(PingResult(peer, address, error, time.monotonic() - began))
    return results
