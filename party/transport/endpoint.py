"""This party's end of the data plane: the envelopes it takes, the channels it sends on.

`Endpoint.push` takes one envelope (the `Push` RPC): it checks that the envelope is meant
for this party, answers `vfl doctor`'s pings itself (`transport.ping`), refuses envelopes
once the daemon stops, and hands the rest to the daemon's `Deliver` (a job's mailbox, or
an online scoring session's). `Endpoint.channel` builds the channel of a job or a session:
gRPC to the peers (`transport.grpc_channel`), every envelope counted and, with an audit
directory, logged (`transport.audit`), over an emulated WAN if given one (`transport.wan`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from vfl.contract.spec import NetworkSpec
from vfl.party.errors import JobError, ShuttingDown
from vfl.party.transport.audit import AuditLog
from vfl.party.transport.grpc_channel import GrpcChannel
from vfl.party.transport.ping import PING_JOB, PingResult, ping_peers
from vfl.party.transport.wan import ShapedChannel
from vfl.rpc import PeerClients
from vfl.secure.channel import Channel, EnvelopeHook, Mailbox, decode_payload
from vfl.secure.errors import PayloadError

# (job or session id, sender, tag, payload bytes) -> False for a duplicate tag; None: no
# job or session of that id is here
Deliver = Callable[[str, str, str, bytes], bool | None]


class Endpoint:
    """This party's end of the data plane, shared by its jobs and scoring sessions.

    Args:
        deliver: files an envelope with its job or session.
        count: sees every envelope (the daemon's metrics).
        audit_dir: where every envelope is logged too (the wire audit), if given.
    """

    def __init__(
        self,
        party_id: str,
        clients: PeerClients,
        deliver: Deliver,
        count: EnvelopeHook,
        audit_dir: str | None = None,
    ) -> None:
        self.party_id = party_id
        self._clients, self._deliver = clients, deliver
        self._count, self._audit_dir = count, audit_dir
        self._stopping = threading.Event()

    def push(self, job_id: str, sender: str, receiver: str, tag: str, data: bytes) -> bool:
        """Take one envelope of a job or an online scoring session; returns False for a
        duplicate tag.

        Raises:
            JobError: a receiver that is not this party, or no such job or session here
                (or what `deliver` raises).
            ShuttingDown: the daemon is stopping (`stop_taking`).
            PayloadError: an envelope of `PING_JOB` that is not a ping.
        """
        if receiver != self.party_id:
            raise JobError(
                f"envelope for party '{receiver}' reached party "
                f"'{self.party_id}'; check the peer addresses"
            )
        if job_id == PING_JOB:
            return self._answer_ping(sender, tag, data)
        if self._stopping.is_set():
            raise ShuttingDown(
                f"party '{receiver}' is shutting down; envelope '{tag}' is not taken "
                "(the job pauses and can resume once the party is back)"
            )
        fresh = self._deliver(job_id, sender, tag, data)
        if fresh is None:
            raise JobError(f"job {job_id} is not known to party '{receiver}'")
        return fresh

    def stop_taking(self) -> None:
        """Refuse every envelope from now on (`ShuttingDown`: the peers' jobs pause)."""
        self._stopping.set()

    def channel(
        self,
        job_id: str,
        mailbox: Mailbox,
        addresses: dict[str, str],
        send_timeout: float,
        network: NetworkSpec | None = None,
        plane: str | None = None,
    ) -> Channel:
        """The data-plane channel of job or scoring session `job_id`: it receives from
        `mailbox` and sends to the peers at `addresses`, waiting up to `send_timeout`
        seconds for a peer to take an envelope; with `network`, over an emulated WAN.
        `plane`: the peers take its envelopes on that plane's threads (`SESSION_PLANE`)."""
        channel = GrpcChannel(
            self.party_id,
            job_id,
            mailbox,
            addresses,
            self._clients,
            hook=self._hook(job_id),
            send_timeout=send_timeout,
            plane=plane,
        )
        return channel if network is None else ShapedChannel(channel, network)

    def check_peers(self, addresses: dict[str, str]) -> list[PingResult]:
        """`vfl doctor`'s data-plane check: push a ping to each peer (id -> address)."""
        return ping_peers(self.party_id, addresses, self._clients, self._hook(PING_JOB))

    def _answer_ping(self, sender: str, tag: str, data: bytes) -> bool:
        """Take a peer's ping (a `Ping` payload and nothing else).

        Raises:
            PayloadError: the envelope is not a ping.
        """
        if decode_payload(data).WhichOneof("kind") != "ping":
            raise PayloadError(f"envelope '{tag}' for job {PING_JOB} must be a ping")
        self._hook(PING_JOB)("received", sender, self.party_id, tag, data)
        return True

    def _hook(self, job_id: str) -> EnvelopeHook:
        """What sees each envelope of a job or session: the count, and the audit log."""
        count = self._count
        if not self._audit_dir:
            return count
        audit = AuditLog(self._audit_dir, self.party_id, job_id)

        def both(direction: str, sender: str, receiver: str, tag: str, data: bytes) -> None:
            count(direction, sender, receiver, tag, data)
            audit(direction, sender, receiver, tag, data)

        return both
