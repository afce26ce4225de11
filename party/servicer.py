"""The PartyService servicer: protobuf in, `PartyDaemon` call, protobuf out.

Domain errors become gRPC statuses with the error's message; nothing else lives here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import TypeVar

import grpc

from coordinator.errors import CoordinatorError
from party.daemon import PartyDaemon
from party.errors import ConfigError, DataError, JobError, PartyError
from proto import party_pb2 as pb
from proto import party_pb2_grpc as pb_grpc
from proto.rpc import MAX_ENVELOPE_BYTES
from secure.errors import ChannelClosed, PayloadError, SecureError

log = logging.getLogger(__name__)
T = TypeVar("T")

_CODES: list[tuple[type[Exception], grpc.StatusCode]] = [
    (ChannelClosed, grpc.StatusCode.ABORTED),
    (PayloadError, grpc.StatusCode.INVALID_ARGUMENT),
    (DataError, grpc.StatusCode.FAILED_PRECONDITION),
    (ConfigError, grpc.StatusCode.FAILED_PRECONDITION),
    (JobError, grpc.StatusCode.FAILED_PRECONDITION),
    (PartyError, grpc.StatusCode.FAILED_PRECONDITION),
    (CoordinatorError, grpc.StatusCode.INVALID_ARGUMENT),
    (SecureError, grpc.StatusCode.INVALID_ARGUMENT),
]


def call(context: grpc.ServicerContext, fn: Callable[[], T]) -> T:
    """Run `fn`, turning domain errors into a gRPC status with their message."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - every error becomes a status, never a crash
        for kind, code in _CODES:
            if isinstance(exc, kind):
                context.abort(code, str(exc))
        log.exception("internal error")
        context.abort(grpc.StatusCode.INTERNAL, f"internal error: {type(exc).__name__}: {exc}")
    raise AssertionError("unreachable")  # context.abort raises


def assemble(request_iterator: Iterator[pb.PushChunk]) -> tuple[pb.PushChunk, bytes]:
    """Join a Push stream into (header chunk, payload bytes).

    Raises:
        PayloadError: empty stream, missing header fields, or a size above the limit.
    """
    first = next(request_iterator, None)
    if first is None:
        raise PayloadError("empty Push stream: send at least one chunk with the header")
    if not first.job_id or not first.tag or not first.sender:
        raise PayloadError("the first Push chunk must carry job_id, tag and sender")
    if first.total_size < 0 or first.total_size > MAX_ENVELOPE_BYTES:
        raise PayloadError(
            f"envelope of {first.total_size} bytes exceeds the limit of "
            f"{MAX_ENVELOPE_BYTES} bytes; use smaller batches"
        )
    parts, size = [first.data], len(first.data)
    for chunk in request_iterator:
        size += len(chunk.data)
        if size > first.total_size:
            raise PayloadError(
                f"envelope '{first.tag}' is larger than its declared size {first.total_size}"
            )
        parts.append(chunk.data)
    if size != first.total_size:
        raise PayloadError(f"envelope '{first.tag}' has {size} bytes, declared {first.total_size}")
    return first, b"".join(parts)


class PartyServicer(pb_grpc.PartyServiceServicer):
    def __init__(self, daemon: PartyDaemon) -> None:
        self._d = daemon

    def Push(self, request_iterator, context):  # noqa: N802
        def push() -> pb.PushResponse:
            head, data = assemble(request_iterator)
            fresh = self._d.push(head.job_id, head.sender, head.receiver, head.tag, data)
            return pb.PushResponse(duplicate=not fresh)

        return call(context, push)

    def PrepareJob(self, request, context):  # noqa: N802
        peers = {p.party_id: p.address for p in request.peers}
        rows, feats = call(
            context, lambda: self._d.prepare(request.job_id, request.spec_json, peers)
        )
        return pb.PrepareJobResponse(rows=rows, features=feats)

    def StartJob(self, request, context):  # noqa: N802
        call(context, lambda: self._d.start(request.job_id))
        return pb.StartJobResponse()

    def AbortJob(self, request, context):  # noqa: N802
        call(context, lambda: self._d.abort(request.job_id, request.reason))
        return pb.AbortJobResponse()

    def GetPartyInfo(self, request, context):  # noqa: N802
        cfg = self._d.config
        return pb.GetPartyInfoResponse(
            party_id=cfg.party_id,
            datasets=sorted(cfg.datasets),
            running_jobs=self._d.running_jobs(),
        )
