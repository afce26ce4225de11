"""The PartyService servicer: protobuf in, `PartyDaemon` call, protobuf out.

Domain errors become gRPC statuses with the error's shareable form (`party.errors`); where
that holds details back, the full message goes to this party's log. Nothing else lives here.
With TLS, a Push is accepted only from the party its certificate names as the sender, and
only for a job or scoring session that party is in, which `PartyDaemon.admit` checks from
the header chunk before the payload is read (with its size and room in the job's
mailbox); `GetPartyInfo` tells the jobs a party holds only to the coordinator. The
control RPCs (PrepareJob, StartJob, AbortJob, ListCheckpoints, ListModelParts,
DeleteModelPart, CheckPeers) only from the coordinator. Online scoring checks its callers in
`party.inference.online`: `Predict` from any identity but the model's passive parties (or
the config's `scorers:`), `OpenScoring` and `CloseScoring` only from the model's active
party. A call refused for capacity (`Overloaded`: a model's queue is full, or its
micro-batches cannot answer a `Predict` within the call's deadline or the party's, or a
job's mailbox is full) is RESOURCE_EXHAUSTED with the retry hint in its trailing metadata
(`rpc.planes`; the planes' own bounds, the scoring plane's threads and the Push streams
one caller holds, refuse before this servicer is reached).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import grpc
from vfl.contract.errors import ContractError
from vfl.contract.logs import job_context
from vfl.party.daemon import PartyDaemon
from vfl.party.errors import (
    AccessDenied,
    ConfigError,
    DataError,
    JobError,
    LimitExceeded,
    Overloaded,
    PartyBusy,
    PartyError,
    PeerUnavailable,
    RequestError,
    ShuttingDown,
    TableUnavailable,
    UnknownModel,
    shareable,
)
from vfl.party.inference.serving import NOT_AT_PEER, UNKNOWN_ID, Prediction
from vfl.party.state.model_store import Manifest
from vfl.proto import party_pb2 as pb, party_pb2_grpc as pb_grpc
from vfl.rpc import (
    COORDINATOR_ID,
    VERSION,
    Stalled,
    call_with_status,
    caller_party,
    check_caller,
    retry_metadata,
)
from vfl.secure.errors import ChannelClosed, PayloadError, SecureError

T = TypeVar("T")
log = logging.getLogger(__name__)

_CODES: list[tuple[type[Exception], grpc.StatusCode]] = [
    (Stalled, grpc.StatusCode.CANCELLED),  # the stream watch cancelled the call already
    (UnknownModel, grpc.StatusCode.NOT_FOUND),
    (Overloaded, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (AccessDenied, grpc.StatusCode.PERMISSION_DENIED),
    (PeerUnavailable, grpc.StatusCode.UNAVAILABLE),
    (TableUnavailable, grpc.StatusCode.UNAVAILABLE),
    (ShuttingDown, grpc.StatusCode.UNAVAILABLE),
    (RequestError, grpc.StatusCode.INVALID_ARGUMENT),
    (LimitExceeded, grpc.StatusCode.RESOURCE_EXHAUSTED),  # the job fails (exit 1)
    (PartyBusy, grpc.StatusCode.ABORTED),  # the coordinator queues the job
    (ChannelClosed, grpc.StatusCode.ABORTED),
    (PayloadError, grpc.StatusCode.INVALID_ARGUMENT),
    (DataError, grpc.StatusCode.FAILED_PRECONDITION),
    (ConfigError, grpc.StatusCode.FAILED_PRECONDITION),
    (JobError, grpc.StatusCode.FAILED_PRECONDITION),
    (PartyError, grpc.StatusCode.FAILED_PRECONDITION),
    (ContractError, grpc.StatusCode.INVALID_ARGUMENT),
    (SecureError, grpc.StatusCode.INVALID_ARGUMENT),
]


def call(context: grpc.ServicerContext, fn: Callable[[], T], daemon: PartyDaemon) -> T:
    """Run `fn`; errors become statuses by `_CODES` (`rpc.call_with_status`) with
    what of them may leave the daemon's party; a refusal for capacity (`Overloaded`)
    carries its retry hint in the trailing metadata (`rpc.retry_metadata`)."""

    def run() -> T:
        try:
            return fn()
        except Overloaded as exc:  # RESOURCE_EXHAUSTED, with when to retry
            context.set_trailing_metadata(retry_metadata(exc.retry_after_s))
            raise

    def message(exc: Exception) -> str:
        party_id = daemon.config.party_id
        public = shareable(exc, party_id)
        if public != str(exc):
            log.warning("party %s: %s", party_id, str(exc))  # the details stay here (as text:
            # a record that keeps the error would keep its traceback's frames alive)
        return public

    return call_with_status(context, run, _CODES, message)


def header(request_iterator: Iterator[pb.PushChunk]) -> pb.PushChunk:
    """The first chunk of a Push stream: job, tag, sender, receiver and total size.

    Raises:
        PayloadError: empty stream, missing header fields, or a negative size.
    """
    first = next(request_iterator, None)
    if first is None:
        raise PayloadError("empty Push stream: send at least one chunk with the header")
    if not first.job_id or not first.tag or not first.sender:
        raise PayloadError("the first Push chunk must carry job_id, tag and sender")
    if first.total_size < 0:
        raise PayloadError(f"envelope '{first.tag}' declares a negative size")
    return first


def body(first: pb.PushChunk, request_iterator: Iterator[pb.PushChunk]) -> bytes:
    """The payload of a Push stream whose header chunk `first` was read already.

    Raises:
        PayloadError: the chunks add up to more or less than the declared size (read no
            further than one chunk past it).
    """
    payload = bytearray()  # grown as chunks come (each chunk let go at once: no piles of
    # 1 MiB blocks left in the allocator's free lists once the envelope is taken)
    for chunk in itertools.chain((first,), request_iterator):
        if len(payload) + len(chunk.data) > first.total_size:
            raise PayloadError(
                f"envelope '{first.tag}' is larger than its declared size {first.total_size}"
            )
        payload += chunk.data
    if len(payload) != first.total_size:
        raise PayloadError(
            f"envelope '{first.tag}' has {len(payload)} bytes, declared {first.total_size}"
        )
    return bytes(payload)


_ID_ERRORS = {
    "": pb.ID_ERROR_UNSPECIFIED,
    UNKNOWN_ID: pb.ID_ERROR_UNKNOWN_ID,
    NOT_AT_PEER: pb.ID_ERROR_NOT_AT_PEER,
}


def prediction_to_proto(prediction: Prediction) -> pb.PredictResponse:
    return pb.PredictResponse(
        model_id=prediction.model_id,
        columns=list(prediction.columns),
        results=[
            pb.IdScore(
                id=r.id,
                values=list(r.values),
                predicted_class=r.label,
                error=_ID_ERRORS[r.error],
                message=r.message,
            )
            for r in prediction.results
        ],
    )


def _from_coordinator(
    context: grpc.ServicerContext, action: str = "prepare, start or abort jobs on a party"
) -> None:
    check_caller(context, COORDINATOR_ID, action)


def _part(
    m: Manifest, drift: dict[str, int], problems: dict[str, str], problem: str
) -> pb.ModelPart:
    """What may leave the party of one model part: no path, no column name; drift counts,
    the public form of its online scoring's table problems, and why the part cannot score
    (it is corrupt), if so."""
    return pb.ModelPart(
        problem=problem,
        drift=pb.DriftCounts(**drift),
        table_problems=problems,
        model_id=m.model_id,
        name=m.name,
        role=m.role,
        protocol=m.protocol,
        created_at=m.created_at,
        key_fingerprint=m.key_fingerprint,
        columns=len(m.columns),
    )


class PartyServicer(pb_grpc.PartyServiceServicer):
    def __init__(self, daemon: PartyDaemon) -> None:
        self._d = daemon

    def Push(self, request_iterator, context):  # noqa: N802
        head = call(context, lambda: header(request_iterator), self._d)
        check_caller(context, head.sender, f"send envelopes as party '{head.sender}'")

        def push() -> pb.PushResponse:
            d = self._d  # job (or session), sender, receiver, size: all before the payload
            try:
                arrival = d.admit(
                    head.job_id, head.sender, head.receiver, head.tag, head.total_size
                )
            except Overloaded:  # its job's mailbox is full: RESOURCE_EXHAUSTED, with a hint
                d.metrics.refusal("mailbox")
                raise
            if arrival is None:
                return pb.PushResponse(duplicate=True)  # its payload is not read
            with arrival:
                arrival.deliver(body(head, request_iterator))
            return pb.PushResponse(duplicate=False)

        return call(context, push, self._d)

    def PrepareJob(self, request, context):  # noqa: N802
        _from_coordinator(context)
        peers = {p.party_id: p.address for p in request.peers}
        with job_context(request.job_id):
            call(
                context,
                lambda: self._d.prepare(
                    request.job_id, request.spec_json, peers, request.resume_round
                ),
                self._d,
            )
        return pb.PrepareJobResponse()

    def ListCheckpoints(self, request, context):  # noqa: N802
        _from_coordinator(context)
        held = call(
            context, lambda: self._d.checkpoints(request.job_id, request.spec_json), self._d
        )
        return pb.ListCheckpointsResponse(
            checkpoints=[pb.CheckpointInfo(round=r, problem=p) for r, p in sorted(held.items())]
        )

    def StartJob(self, request, context):  # noqa: N802
        _from_coordinator(context)
        call(context, lambda: self._d.start(request.job_id), self._d)
        return pb.StartJobResponse()

    def AbortJob(self, request, context):  # noqa: N802
        _from_coordinator(context)
        call(context, lambda: self._d.drop(request.job_id, request.reason), self._d)
        return pb.AbortJobResponse()

    def ListModelParts(self, request, context):  # noqa: N802
        _from_coordinator(context, "list a party's models")
        d = self._d
        held = call(context, lambda: [(m, d.parts.problem(m.model_id)) for m in d.models()], d)
        unreadable = call(context, d.parts.unreadable, d)
        parts = [
            _part(m, d.parts.drift(m.model_id), d.table_problems(m.model_id), problem)
            for m, problem in held
        ]
        parts += [pb.ModelPart(model_id=mid, problem=why) for mid, why in unreadable.items()]
        return pb.ListModelPartsResponse(parts=parts)

    def DeleteModelPart(self, request, context):  # noqa: N802
        _from_coordinator(context, "delete a party's models")
        held = call(context, lambda: self._d.delete_model(request.model_id), self._d)
        return pb.DeleteModelPartResponse(held=held)

    def GetPartyInfo(self, request, context):  # noqa: N802
        cfg = self._d.config
        caller = call(context, lambda: caller_party(context), self._d)
        jobs = caller in (None, COORDINATOR_ID)  # the jobs held: the coordinator's business
        return pb.GetPartyInfoResponse(
            party_id=cfg.party_id,
            datasets=sorted(cfg.datasets),
            running_jobs=self._d.running_jobs() if jobs else [],
            started_jobs=self._d.started_jobs() if jobs else [],
            version=VERSION,
            time=time.time(),
            max_concurrent_jobs=cfg.limits.max_concurrent_jobs,
            started_at=self._d.started_at,
        )

    def CheckPeers(self, request, context):  # noqa: N802
        _from_coordinator(context, "ask a party to check its peers")
        peers = {p.party_id: p.address for p in request.peers}
        results = call(context, lambda: self._d.check_peers(peers), self._d)
        return pb.CheckPeersResponse(
            peers=[
                pb.PeerCheck(party_id=r.peer, address=r.address, error=r.error, seconds=r.seconds)
                for r in results
            ]
        )

    def Predict(self, request, context):  # noqa: N802
        def predict() -> pb.PredictResponse:
            caller = caller_party(context)
            ids = list(request.ids)
            deadline_s = context.time_remaining()  # None or huge: the call set none
            try:
                prediction = self._d.online.predict(request.model_id, ids, caller, deadline_s)
            except Overloaded as exc:  # RESOURCE_EXHAUSTED, with when to retry (`call`)
                self._d.metrics.refusal(exc.at)
                raise
            return prediction_to_proto(prediction)

        return call(context, predict, self._d)

    def OpenScoring(self, request, context):  # noqa: N802
        def open_session() -> None:
            caller = caller_party(context)
            online = self._d.online
            online.open_session(request.model_id, request.session_id, caller, request.reply_to)

        with job_context(request.session_id):
            call(context, open_session, self._d)
        return pb.OpenScoringResponse()

    def CloseScoring(self, request, context):  # noqa: N802
        def close() -> None:
            caller = caller_party(context)
            self._d.online.close_session(request.session_id, request.reason, caller)

        call(context, close, self._d)
        return pb.CloseScoringResponse()
