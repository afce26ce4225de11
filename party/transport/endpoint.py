"""This party's end of the data plane: the envelopes it takes, the channels it sends on.

`Endpoint.admit` takes one envelope (the `Push` RPC) from its header, before its payload
is read: it checks that the envelope is meant for this party, answers `vfl doctor`'s
pings itself (`transport.ping`), refuses envelopes once the daemon stops, finds the
mailbox of the job or online scoring session the sender is in (the daemon's `Locate`),
checks the envelope's size against the party's `limits.max_envelope_mb` and books room
for its payload in that mailbox (`limits.mailbox_mb`). The caller then reads the payload
and files it (`Arrival.deliver`). A sender learns nothing of the jobs it is not in: an
unknown job and one it is not a party of get the same answer. `Endpoint.channel` builds
the channel of a job or a session: gRPC to the peers (`transport.grpc_channel`), every
envelope counted and, with an audit directory, logged (`transport.audit`), over an
emulated WAN if given one (`transport.wan`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

from vfl.contract.spec import NetworkSpec
from vfl.party.errors import JobError, Overloaded, ShuttingDown
from vfl.party.limits import MB
from vfl.party.transport.audit import AuditLog
from vfl.party.transport.grpc_channel import GrpcChannel
from vfl.party.transport.ping import PING_JOB, PING_MAX_BYTES, PingResult, ping_peers
from vfl.party.transport.wan import ShapedChannel
from vfl.rpc import PeerClients
from vfl.secure.channel import Channel, EnvelopeHook, Mailbox, decode_payload
from vfl.secure.errors import ChannelBusy, ChannelClosed, PayloadError

# (job or session id, sender, tag) -> the mailbox of that job or session, if `sender` is a
# party of it; None if no job or session of that id with `sender` in it is here
Locate = Callable[[str, str, str], Mailbox | None]
MAILBOX_RETRY_S = 0.5  # when a sender refused for a full mailbox may try again


@dataclass
class Arrival:
    """An envelope admitted from its header, whose payload is still to be read: `deliver`
    files it; leaving a `with` block on an error gives its booked room back."""

    deliver: Callable[[bytes], None]
    cancel: Callable[[], None] = lambda: None

    def __enter__(self) -> Arrival:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if kind is not None:
            self.cancel()


class Endpoint:
    """This party's end of the data plane, shared by its jobs and scoring sessions.

    Args:
        locate: the mailbox of an envelope's job or session (see `Locate`).
        count: sees every envelope (the daemon's metrics).
        max_envelope: the largest envelope taken, in bytes (`limits.max_envelope_mb`).
        audit_dir: where every envelope is logged too (the wire audit), if given.
    """

    def __init__(
        self,
        party_id: str,
        clients: PeerClients,
        locate: Locate,
        count: EnvelopeHook,
        max_envelope: int,
        audit_dir: str | None = None,
    ) -> None:
        self.party_id = party_id
        self._clients, self._locate = clients, locate
        self._count, self._audit_dir = count, audit_dir
        self._max_envelope = max_envelope
        self._stopping = threading.Event()

    def admit(self, job_id: str, sender: str, receiver: str, tag: str, size: int) -> Arrival | None:
        """Take `sender`'s envelope `tag` of `size` bytes for job or session `job_id`, from
        its header; None for a tag taken before (a duplicate: its payload need not be read).

        Raises:
            JobError: a receiver that is not this party, no such job or session here with
                `sender` in it (one answer for both), or a job of `sender` that ended.
            PayloadError: an envelope larger than `limits.max_envelope_mb`, or a ping that
                is too large.
            Overloaded: the job's mailbox holds `limits.mailbox_mb` (retry after the hint).
            ShuttingDown: the daemon is stopping (`stop_taking`).
        """
        me = self.party_id
        if receiver != me:
            raise JobError(
                f"envelope for party '{receiver}' reached party '{me}'; check the peer addresses"
            )
        if job_id == PING_JOB:
            return self._ping(sender, tag, size)
        if self._stopping.is_set():
            raise self._shutting_down(tag)
        mailbox = self._locate(job_id, sender, tag)
        if mailbox is None:
            raise JobError(  # one answer for an unknown job and one `sender` is not in
                f"job {job_id} is not known to party '{me}' (or party '{sender}' is not in it)"
            )
        if size > self._max_envelope:
            raise PayloadError(
                f"envelope '{tag}' of {size / MB:.1f} MiB from party '{sender}' is larger than "
                f"party '{me}' takes ({self._max_envelope / MB:g} MiB, its config's "
                "limits.max_envelope_mb); use smaller batches, or ask its operator to raise "
                "that limit"
            )
        try:
            fresh = mailbox.reserve(sender, tag, size)
        except ChannelClosed:
            if self._stopping.is_set():  # closed because the daemon stops: a pause
                raise self._shutting_down(tag) from None
            raise
        except ChannelBusy as exc:
            raise Overloaded(
                f"party '{me}' takes no more of job {job_id}'s envelopes now: {exc} (its "
                f"config's limits.mailbox_mb, {mailbox.max_bytes / MB:g} MiB, bounds what one "
                "job's envelopes hold there)",
                MAILBOX_RETRY_S,
            ) from None
        if not fresh:
            return None

        def deliver(data: bytes) -> None:
            try:
                mailbox.fill(sender, tag, data)
            except ChannelClosed:  # the job closed while its payload came in: because the
                if self._stopping.is_set():  # daemon stops, it is a pause, not an end
                    raise self._shutting_down(tag) from None
                raise

        return Arrival(deliver, lambda: mailbox.cancel(sender, tag))

    def _shutting_down(self, tag: str) -> ShuttingDown:
        return ShuttingDown(
            f"party '{self.party_id}' is shutting down; envelope '{tag}' is not taken "
            "(the job pauses and can resume once the party is back)"
        )

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

    def _ping(self, sender: str, tag: str, size: int) -> Arrival:
        """Take a peer's ping: a `Ping` payload of at most `PING_MAX_BYTES`.

        Raises:
            PayloadError: the envelope is too large to be a ping (checked before its
                payload is read), or it is not a ping.
        """
        if size > PING_MAX_BYTES:
            raise PayloadError(f"envelope '{tag}' for job {PING_JOB} is too large for a ping")

        def answer(data: bytes) -> None:
            if decode_payload(data).WhichOneof("kind") != "ping":
                raise PayloadError(f"envelope '{tag}' for job {PING_JOB} must be a ping")
            self._hook(PING_JOB)("received", sender, self.party_id, tag, data)

        return Arrival(answer)

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
