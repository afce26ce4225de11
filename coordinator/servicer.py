"""The CoordinatorService servicer: translate protobufs to `Lifecycle`/`JobStore` calls.

Domain errors become statuses with their message (unexpected ones INTERNAL, never a
crash). With TLS, RegisterParty and ReportProgress for party X are accepted only from X's
certificate; the user RPCs (submit, list, get, watch, cancel) from any certificate of the
federation, e.g. the operator's `admin`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import grpc

from coordinator.errors import CoordinatorError, PartyUnavailable, SpecError, UnknownJob
from coordinator.lifecycle import Lifecycle
from coordinator.store import JobRecord
from proto import coordinator_pb2 as pb
from proto import coordinator_pb2_grpc as pb_grpc
from proto.rpc import call_with_status, check_caller

T = TypeVar("T")
WATCH_POLL_S = 0.2

_CODES: list[tuple[type[Exception], grpc.StatusCode]] = [
    (SpecError, grpc.StatusCode.INVALID_ARGUMENT),
    (UnknownJob, grpc.StatusCode.NOT_FOUND),
    (PartyUnavailable, grpc.StatusCode.UNAVAILABLE),
    (CoordinatorError, grpc.StatusCode.INVALID_ARGUMENT),
    (ValueError, grpc.StatusCode.INVALID_ARGUMENT),
]


def _call(context: grpc.ServicerContext, fn: Callable[[], T]) -> T:
    """Run `fn`; errors become statuses by `_CODES` (`proto.rpc.call_with_status`)."""
    return call_with_status(context, fn, _CODES)


def _summary(r: JobRecord) -> pb.JobSummary:
    return pb.JobSummary(
        job_id=r.job_id,
        name=r.name,
        state=r.state,
        created_at=r.created_at,
        updated_at=r.updated_at,
        reason=r.reason,
    )


def _view(r: JobRecord) -> pb.GetJobResponse:
    result = pb.JobResult()
    result.CopyFrom(r.result)
    result.job = r.job_id
    return pb.GetJobResponse(job=_summary(r), result=result)


class CoordinatorServicer(pb_grpc.CoordinatorServiceServicer):
    def __init__(self, lifecycle: Lifecycle) -> None:
        self._life = lifecycle
        self._store = lifecycle.store

    def SubmitJob(self, request, context):  # noqa: N802
        job_id = _call(context, lambda: self._life.submit(request.spec_yaml))
        return pb.SubmitJobResponse(job_id=job_id)

    def ListJobs(self, request, context):  # noqa: N802
        return pb.ListJobsResponse(jobs=[_summary(r) for r in _call(context, self._store.list)])

    def GetJob(self, request, context):  # noqa: N802
        return _view(_call(context, lambda: self._store.get(request.job_id)))

    def WatchJob(self, request, context):  # noqa: N802
        last = None
        while context.is_active():
            record = _call(context, lambda: self._store.get(request.job_id))
            if record.updated_at != last:
                last = record.updated_at
                yield _view(record)
            if record.terminal:
                return
            time.sleep(WATCH_POLL_S)

    def CancelJob(self, request, context):  # noqa: N802
        return pb.CancelJobResponse(state=_call(context, lambda: self._life.cancel(request.job_id)))

    def ResumeJob(self, request, context):  # noqa: N802
        state, rnd = _call(context, lambda: self._life.resume(request.job_id))
        return pb.ResumeJobResponse(state=state, round=rnd)

    def RegisterParty(self, request, context):  # noqa: N802
        check_caller(context, request.party_id, f"register as party '{request.party_id}'")
        _call(
            context,
            lambda: self._life.register(request.party_id, request.address, list(request.datasets)),
        )
        return pb.RegisterPartyResponse()

    def ReportProgress(self, request, context):  # noqa: N802
        check_caller(context, request.party_id, f"report progress as party '{request.party_id}'")
        stop = _call(context, lambda: self._life.report(request.party_id, request))
        return pb.ReportProgressResponse(cancel=stop)
