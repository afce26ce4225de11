"""The gRPC data plane: `GrpcChannel` implements `secure.channel.Channel`.

`send` streams the serialized payload to the peer's `Push` RPC in 1 MiB chunks and retries
while the peer is unavailable (but not after a failed TLS handshake, which retrying cannot
fix), or while it refuses the envelope for now with a retry hint (RESOURCE_EXHAUSTED: the
job's mailbox there is full, or this party holds as many Push streams there as it may);
`recv` reads the local `Mailbox` that the servicer fills. With TLS, every channel checks
that the peer's certificate names the party it was dialed for. A channel with a `plane`
names it in each push's metadata (`PLANE_KEY`): an online scoring session's envelopes
(`SESSION_PLANE`) are taken on threads of their own at the peer.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import grpc
from vfl.proto import party_pb2
from vfl.rpc import (
    CHUNK_BYTES,
    PLANE_KEY,
    PeerClients,
    explain,
    handshake_failed,
    retry_after_s,
)
from vfl.secure.channel import ChannelStats, EnvelopeHook, Mailbox, Payload, decode_payload
from vfl.secure.errors import ChannelClosed, ChannelError

# A push that may go through on a retry: the peer is not reachable yet, or its server
# cancelled the call as it stopped (this side never cancels a push). Retries end at the
# send deadline; meanwhile the coordinator pauses the job if the peer stays away.
_TRANSIENT = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED})
SESSION_PLANE = "session"  # the plane of an online scoring session's envelopes


def chunks(
    job_id: str, tag: str, sender: str, receiver: str, data: bytes
) -> Iterator[party_pb2.PushChunk]:
    """Split one envelope into chunks; the first carries the header and total size."""
    yield party_pb2.PushChunk(
        job_id=job_id,
        tag=tag,
        sender=sender,
        receiver=receiver,
        data=data[:CHUNK_BYTES],
        total_size=len(data),
    )
    for start in range(CHUNK_BYTES, len(data), CHUNK_BYTES):
        yield party_pb2.PushChunk(data=data[start : start + CHUNK_BYTES])


class GrpcChannel:
    """A party's data-plane channel for one job."""

    def __init__(
        self,
        party_id: str,
        job_id: str,
        mailbox: Mailbox,
        peers: dict[str, str],
        clients: PeerClients,
        *,
        hook: EnvelopeHook | None = None,
        send_timeout: float = 300.0,
        plane: str | None = None,
    ) -> None:
        self.party_id, self.job_id = party_id, job_id
        self._metadata = () if plane is None else ((PLANE_KEY, plane),)
        self.stats = ChannelStats()
        self._mailbox, self._peers, self._clients = mailbox, peers, clients
        self._hook, self._send_timeout = hook, send_timeout

    def send(self, peer: str, tag: str, payload: Payload) -> None:
        if peer not in self._peers:
            raise ChannelError(
                f"no address for peer '{peer}'; add it under 'peers' in the "
                "party config or register it with the coordinator"
            )
        data = payload.SerializeToString()
        if self._hook:
            self._hook("sent", self.party_id, peer, tag, data)
        self._push(peer, tag, data)
        self.stats.count_sent(len(data))

    def _push(self, peer: str, tag: str, data: bytes) -> None:
        deadline = time.monotonic() + self._send_timeout
        delay = 0.1
        while True:
            if self._mailbox.closed:
                raise ChannelClosed(f"job {self.job_id} closed while sending '{tag}'")
            address = self._peers[peer]
            try:
                self._clients.stub(address, peer).Push(
                    chunks(self.job_id, tag, self.party_id, peer, data),
                    timeout=max(1.0, deadline - time.monotonic()),
                    metadata=self._metadata,
                )
                return
            except grpc.RpcError as exc:
                tls = self._clients.tls
                hint = retry_after_s(exc)  # refused for now: retry after the hint
                retry = hint is not None or (
                    exc.code() in _TRANSIENT and not handshake_failed(exc, tls is not None)
                )
                wait = delay if hint is None else hint
                if not retry or time.monotonic() + wait > deadline:
                    why = explain(exc, address, tls, peer)
                    raise ChannelError(
                        f"sending '{tag}' to party '{peer}' at {address} failed: {why}"
                    ) from None
                time.sleep(wait)
                if hint is None:
                    delay = min(delay * 2, 2.0)

    def recv(self, peer: str, tag: str, timeout: float | None = None) -> Payload:
        data = self._mailbox.get(peer, tag, timeout)
        self.stats.count_received(len(data))
        if self._hook:
            self._hook("received", peer, self.party_id, tag, data)
        return decode_payload(data)

    def close(self) -> None:
        """Nothing to deliver (a send returns once the peer took the envelope); the
        mailbox and the channels to the peers are the daemon's."""
