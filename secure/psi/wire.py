"""Message layer of the PSI protocol: tags, point streams and aborts over a `Channel`.

Blinded points travel as `EcPoints` payloads (`blinded_by` = the party that applied the
latest blinding) in chunks, so a receiver can blind chunk c
while chunk c+1 is still being computed. Each stream starts with a control header
`{count, chunk}`. Any message may be replaced by a control `{psi_abort: reason}`, which
the receiver turns into a `PsiError`; reasons name counts and parties, never an id.

Tags: `<prefix>/<step>/n` for a stream header, `<prefix>/<step>/<c>` for chunk c, and
`<prefix>/<step>` for single messages.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TypeVar

from vfl.proto import common_pb2
from vfl.secure.channel import Channel, Payload
from vfl.secure.errors import ChannelTimeout, PayloadError, PsiError, SecureError
from vfl.secure.psi.curve import POINT_BYTES
from vfl.secure.wire.payload import control_from_payload, control_to_payload

logger = logging.getLogger(__name__)

ABORT_FIELD = "psi_abort"
T = TypeVar("T")
MAX_CHUNK = 1 << 22


def points_to_payload(blob: bytes, owner: str) -> Payload:
    count = len(blob) // POINT_BYTES
    points = common_pb2.EcPoints(curve="x25519", count=count, blob=blob, blinded_by=owner)
    return Payload(ec_points=points)


def points_from_payload(payload: Payload, count: int) -> bytes:
    """The blob of `count` 32-byte points carried by `payload`.

    Raises:
        PayloadError: wrong payload kind, point width, shape or blob length.
    """
    if payload.WhichOneof("kind") != "ec_points":
        raise PayloadError(f"expected curve points, got a '{payload.WhichOneof('kind')}' payload")
    points = payload.ec_points
    if points.curve != "x25519" or points.count != count:
        raise PayloadError(
            f"expected {count} points on curve x25519, got {points.count} on '{points.curve}'"
        )
    if len(points.blob) != count * POINT_BYTES:
        raise PayloadError(
            f"point blob has {len(points.blob)} bytes, expected {count * POINT_BYTES}"
        )
    return bytes(points.blob)


class Stopped(PsiError):
    """Another step of this party's PSI run failed: this one stopped waiting."""


POLL_S = 0.2  # how often a waiting receive checks whether its run was stopped


@dataclass(frozen=True)
class PsiWire:
    """One party's view of the PSI messages of one run. Steps that run at once
    (`together`) share `stopped`: once one fails, the others' sends and receives raise
    `Stopped` instead of waiting for messages a failed run will never get."""

    channel: Channel
    prefix: str
    timeout: float | None
    max_ids: int
    stopped: threading.Event = field(default_factory=threading.Event)

    def together(self, *steps: Callable[[], T]) -> list[T]:
        """Run `steps` in threads of their own and return their results; on the first
        failure stop the others, then raise that failure.

        Raises:
            whatever the first step to fail raised.
        """
        with ThreadPoolExecutor(len(steps), thread_name_prefix=f"{self.prefix}-") as threads:
            futures = [threads.submit(step) for step in steps]
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            failed = [f for f in futures if f in done and f.exception() is not None]
            if failed:
                self.stopped.set()
        if failed:
            raise failed[0].exception()  # type: ignore[misc]
        return [f.result() for f in futures]

    def tag(self, step: str) -> str:
        return f"{self.prefix}/{step}"

    def send(self, peers: Sequence[str], step: str, payload: Payload) -> None:
        for peer in peers:
            self.channel.send(peer, self.tag(step), payload)

    def recv(self, peer: str, step: str) -> Payload:
        """Receive one message; an abort from the peer becomes a PsiError.

        Raises:
            PsiError: the peer aborted the run.
            ChannelTimeout, ChannelClosed: from the channel.
        """
        payload = self._recv(peer, self.tag(step))
        if payload.WhichOneof("kind") == "control" and ABORT_FIELD in payload.control.fields:
            reason = payload.control.fields[ABORT_FIELD]
            raise PsiError(f"party '{peer}' aborted PSI: {reason}")
        return payload

    def _recv(self, peer: str, tag: str) -> Payload:
        """The channel's receive, in slices of `POLL_S` (when a timeout is set) so that a
        stopped run ends it."""
        if self.timeout is None:
            return self.channel.recv(peer, tag, None)
        deadline = time.monotonic() + self.timeout
        while True:
            if self.stopped.is_set():
                raise Stopped(f"{self.prefix}: stopped waiting for '{tag}': another step failed")
            left = deadline - time.monotonic()
            try:
                return self.channel.recv(peer, tag, max(0.0, min(POLL_S, left)))
            except ChannelTimeout:
                if left <= POLL_S:
                    raise

    def abort(self, peers: Sequence[str], step: str, reason: str) -> None:
        """Best effort: tell `peers`, who wait on `step`, why this party stopped."""
        for peer in peers:
            try:
                self.channel.send(peer, self.tag(step), control_to_payload({ABORT_FIELD: reason}))
            except SecureError:
                logger.warning("%s: could not notify party %s of the abort", self.prefix, peer)

    def send_points(
        self, peers: Sequence[str], step: str, count: int, chunk: int, blobs: Iterable[bytes]
    ) -> None:
        """Send a header, then every chunk of `blobs` (each `chunk` points, the last fewer).

        If producing a chunk fails, the peers get an abort in its place, then this re-raises.
        """
        self.send(peers, f"{step}/n", control_to_payload({"count": count, "chunk": chunk}))
        sent = 0
        try:
            for blob in blobs:
                if self.stopped.is_set():
                    raise Stopped(f"{self.prefix}: stopped sending '{step}': another step failed")
                self.send(peers, f"{step}/{sent}", points_to_payload(blob, self.channel.party_id))
                sent += 1
        except SecureError as exc:
            self.abort(peers, f"{step}/{sent}", str(exc))
            raise

    def recv_header(self, peer: str, step: str) -> tuple[int, int]:
        """The (count, chunk) header of a point stream.

        Raises:
            PsiError: the peer aborted the run.
            PayloadError: the header is malformed or announces more than `max_ids` points.
        """
        fields = control_from_payload(self.recv(peer, f"{step}/n"), ("count", "chunk"))
        try:
            count, chunk = int(fields["count"]), int(fields["chunk"])
        except ValueError as exc:
            raise PayloadError("point stream header holds non-integer sizes") from exc
        if not 0 <= count <= self.max_ids or not 1 <= chunk <= MAX_CHUNK:
            raise PayloadError(
                f"party '{peer}' announced {count} points in chunks of {chunk}; allowed are "
                f"0..{self.max_ids} points (PsiConfig.max_ids) in chunks of 1..{MAX_CHUNK}"
            )
        return count, chunk

    def recv_points(self, peer: str, step: str, count: int, chunk: int) -> Iterator[bytes]:
        """Yield the chunks of a stream whose header was read with `recv_header`."""
        for index, start in enumerate(range(0, count, chunk)):
            size = min(chunk, count - start)
            yield points_from_payload(self.recv(peer, f"{step}/{index}"), size)
