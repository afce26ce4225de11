"""The `Channel` the protocols are written against, and its in-process implementation.

A channel sends and receives `Payload` protobufs tagged by step name, e.g. `train/r17/m1`
(the MatMul layer's m1 of training round 17). Tags make retransmission idempotent (a
repeated tag is dropped by the receiving `Mailbox`) and every exchange auditable (an
`EnvelopeHook` sees each envelope). The party daemon's gRPC implementation,
`vfl.party.transport.grpc_channel.GrpcChannel`, fills a `Mailbox` too; the protocols
never see it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from vfl.proto import common_pb2
from vfl.secure.errors import ChannelBusy, ChannelClosed, ChannelTimeout, PayloadError

Payload = common_pb2.Payload

DEFAULT_TIMEOUT_S = 300.0
DEFAULT_MAILBOX_BYTES = 1 << 31  # a mailbox's bound where its owner sets none


@dataclass
class ChannelStats:
    """Data-plane counters of one party in one job."""

    bytes_sent: int = 0
    bytes_received: int = 0
    messages_sent: int = 0
    messages_received: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def count_sent(self, size: int) -> None:
        with self._lock:
            self.bytes_sent += size
            self.messages_sent += 1

    def count_received(self, size: int) -> None:
        with self._lock:
            self.bytes_received += size
            self.messages_received += 1


class Channel(Protocol):
    """What a protocol needs from the data plane."""

    party_id: str
    stats: ChannelStats

    def send(self, peer: str, tag: str, payload: Payload) -> None:
        """Deliver `payload` to `peer` under `tag` (at most once per tag).

        Raises:
            ChannelError: the envelope cannot be delivered (the peer is unreachable, or
                the job was closed).
        """

    def recv(self, peer: str, tag: str, timeout: float | None = None) -> Payload:
        """Block until `peer`'s envelope with `tag` arrives (`timeout` None: the
        channel's default deadline).

        Raises:
            ChannelTimeout: nothing arrived within `timeout` seconds.
            ChannelClosed: the job was cancelled or the channel closed.
            PayloadError: the envelope is not a valid `Payload`.
        """

    def close(self) -> None:
        """Deliver what the channel still holds (an emulated WAN's envelopes in flight),
        then release it: its job is done with it. Idempotent.

        Raises:
            ChannelError: an envelope it held could not be delivered.
        """


class Mailbox:
    """Envelopes received by one party for one job, keyed by (sender, tag).

    Thread-safe. A tag already delivered (or already consumed) is dropped, which makes a
    retried send idempotent. A mailbox that lives long (an online scoring session) bounds
    how many tags it remembers with `max_seen` (the oldest are forgotten first).

    It holds at most `max_bytes` of payloads: those received and not yet taken, and those
    still arriving. A receiver that learns an envelope's size before its payload (a gRPC
    stream's header) books room for it first (`reserve`), then files it (`fill`) or gives
    the room back (`cancel`); beyond the bound an envelope is refused before it is read
    (`ChannelBusy`), so envelopes nobody takes cannot pile up. Closing the mailbox drops
    every payload it holds.
    """

    def __init__(self, max_bytes: int = DEFAULT_MAILBOX_BYTES, max_seen: int | None = None) -> None:
        self._cond = threading.Condition()
        self._items: dict[tuple[str, str], bytes] = {}
        self._arriving: dict[tuple[str, str], int] = {}  # room booked by `reserve`
        self._seen: dict[tuple[str, str], None] = {}  # insertion-ordered
        self._max_seen = max_seen
        self._closed_reason: str | None = None
        self._held_bytes = 0  # payloads held and room booked
        self.max_bytes = max_bytes

    def reserve(self, sender: str, tag: str, size: int) -> bool:
        """Book room for `sender`'s envelope `tag` of `size` bytes before its payload is
        read; False if the tag was delivered already (nothing to read: a duplicate).

        Raises:
            ChannelClosed: the mailbox is closed.
            ChannelBusy: the envelopes held would pass `max_bytes` (or the same envelope
                is still arriving): refused now, the sender may retry.
            PayloadError: the envelope alone is larger than `max_bytes`.
        """
        key = (sender, tag)
        with self._cond:
            if self._closed_reason is not None:
                raise ChannelClosed(f"job closed: {self._closed_reason}")
            if key in self._seen:
                return False
            if size > self.max_bytes:
                raise PayloadError(
                    f"envelope '{tag}' from party '{sender}' has {size} bytes, more than the "
                    f"mailbox holds ({self.max_bytes} bytes)"
                )
            if key in self._arriving:
                raise ChannelBusy(f"envelope '{tag}' from party '{sender}' is still arriving")
            if self._held_bytes + size > self.max_bytes:
                raise ChannelBusy(
                    f"the mailbox holds {_mib(self._held_bytes)} of its {_mib(self.max_bytes)} "
                    f"in envelopes not yet taken; envelope '{tag}' of {_mib(size)} from party "
                    f"'{sender}' does not fit"
                )
            self._arriving[key] = size
            self._held_bytes += size
            return True

    def fill(self, sender: str, tag: str, data: bytes) -> None:
        """File the payload of an envelope `reserve` booked room for.

        Raises:
            ChannelClosed: the mailbox was closed meanwhile (the payload is dropped).
            PayloadError: no room was booked for it.
        """
        key = (sender, tag)
        with self._cond:
            if key not in self._arriving:
                raise PayloadError(f"envelope '{tag}' from party '{sender}' was not reserved")
            self._held_bytes += len(data) - self._arriving.pop(key)
            if self._closed_reason is not None:
                self._held_bytes -= len(data)
                raise ChannelClosed(f"job closed: {self._closed_reason}")
            self._seen[key] = None
            if self._max_seen is not None and len(self._seen) > self._max_seen:
                del self._seen[next(iter(self._seen))]
            self._items[key] = data
            self._cond.notify_all()

    def cancel(self, sender: str, tag: str) -> None:
        """Give back the room booked for an envelope whose payload never came whole (a
        retry may send it again)."""
        with self._cond:
            self._held_bytes -= self._arriving.pop((sender, tag), 0)

    def put(self, sender: str, tag: str, data: bytes) -> bool:
        """Store one envelope's payload bytes. Returns False if the tag was a duplicate.

        Raises:
            ChannelClosed: the mailbox is closed.
            ChannelBusy, PayloadError: no room for it (see `reserve`).
        """
        if not self.reserve(sender, tag, len(data)):
            return False
        self.fill(sender, tag, data)
        return True

    def get(self, sender: str, tag: str, timeout: float | None = None) -> bytes:
        """The payload bytes of `sender`'s envelope `tag`, once it arrives; they leave the
        mailbox (the tag stays known, so a retransmission of it is dropped).

        Raises:
            ChannelTimeout: nothing arrived within `timeout` seconds (None:
                `DEFAULT_TIMEOUT_S`).
            ChannelClosed: the mailbox was closed before it arrived.
        """
        key = (sender, tag)
        deadline = time.monotonic() + (DEFAULT_TIMEOUT_S if timeout is None else timeout)
        with self._cond:
            while key not in self._items:
                if self._closed_reason is not None:
                    raise ChannelClosed(f"job closed: {self._closed_reason}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ChannelTimeout(
                        f"no envelope '{tag}' from party '{sender}' within "
                        f"{timeout if timeout is not None else DEFAULT_TIMEOUT_S:.0f} s; "
                        "is the peer alive and running the same job?"
                    )
                self._cond.wait(left)
            data = self._items.pop(key)
            self._held_bytes -= len(data)
            return data

    def close(self, reason: str) -> None:
        """Refuse new envelopes, drop every payload held, and wake every waiting `get`
        with `ChannelClosed` (`reason` goes into its message; the first reason given
        stays)."""
        with self._cond:
            if self._closed_reason is None:
                self._closed_reason = reason
            self._items.clear()
            self._seen.clear()
            self._held_bytes = sum(self._arriving.values())
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed_reason is not None

    @property
    def held_bytes(self) -> int:
        """Bytes of the payloads held and of the room booked for those arriving."""
        with self._cond:
            return self._held_bytes


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB"


def decode_payload(data: bytes) -> Payload:
    """Raises:
    PayloadError: `data` is not a serialized `Payload`.
    """
    payload = Payload()
    try:
        payload.ParseFromString(data)
    except Exception as exc:  # protobuf raises DecodeError (not exported consistently)
        raise PayloadError(f"payload is not a valid vfl.v1.Payload: {exc}") from exc
    return payload


# Observer of every envelope: (direction, sender, receiver, tag, payload bytes).
EnvelopeHook = Callable[[str, str, str, str, bytes], None]


class InProcessHub:
    """Connects the mailboxes of parties that run as threads of one process."""

    def __init__(self) -> None:
        self.mailboxes: dict[str, Mailbox] = {}

    def channel(self, party_id: str, hook: EnvelopeHook | None = None) -> InProcessChannel:
        """A new mailbox for `party_id` and its channel (`hook` sees its envelopes)."""
        self.mailboxes[party_id] = Mailbox()
        return InProcessChannel(self, party_id, hook)

    def close(self, reason: str) -> None:
        """Close every party's mailbox (see `Mailbox.close`)."""
        for box in self.mailboxes.values():
            box.close(reason)


class InProcessChannel:
    """A `Channel` over an `InProcessHub`: payloads are serialized, so byte counts are real."""

    def __init__(self, hub: InProcessHub, party_id: str, hook: EnvelopeHook | None) -> None:
        self._hub = hub
        self._hook = hook
        self.party_id = party_id
        self.stats = ChannelStats()

    def send(self, peer: str, tag: str, payload: Payload) -> None:
        """Raises:
        PayloadError: `peer` has no mailbox on the hub.
        ChannelBusy: the peer's mailbox is full.
        ChannelClosed: the peer's mailbox is closed.
        """
        data = payload.SerializeToString()
        if peer not in self._hub.mailboxes:
            raise PayloadError(f"unknown peer '{peer}'")
        if self._hook:
            self._hook("sent", self.party_id, peer, tag, data)
        self._hub.mailboxes[peer].put(self.party_id, tag, data)
        self.stats.count_sent(len(data))

    def recv(self, peer: str, tag: str, timeout: float | None = None) -> Payload:
        """Raises:
        ChannelTimeout, ChannelClosed: see `Mailbox.get`.
        PayloadError: the envelope is not a valid `Payload`.
        """
        data = self._hub.mailboxes[self.party_id].get(peer, tag, timeout)
        self.stats.count_received(len(data))
        if self._hook:
            self._hook("received", peer, self.party_id, tag, data)
        return decode_payload(data)

    def close(self) -> None:
        """Nothing to deliver (a send delivers at once); the hub owns the mailboxes."""
