"""The CoordinatorService servicer: translate protobufs to `Lifecycle`/`JobStore` calls."""

from __future__ import annotations

import json
import time

import grpc

from coordinator.errors import CoordinatorError, PartyUnavailable, SpecError, UnknownJob
from coordinator.lifecycle import Lifecycle
from coordinator.store import JobRecord
from proto import coordinator_pb2 as pb
from proto import coordinator_pb2_grpc as pb_grpc

WATCH_POLL_S = 0.2


def _abort(context: grpc.ServicerContext, exc: Exception) -> None:
    code = {
        SpecError: grpc.StatusCode.INVALID_ARGUMENT,
        UnknownJob: grpc.StatusCode.NOT_FOUND,
        PartyUnavailable: grpc.StatusCode.UNAVAILABLE,
    }.get(type(exc), grpc.StatusCode.INVALID_ARGUMENT)
    context.abort(code, str(exc))


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
    result = {k: v for k, v in r.result.items() if k != "started_at"}
    result.update(job=r.job_id, state=r.state)
    if r.reason:
        result["reason"] = r.reason
    return pb.GetJobResponse(job=_summary(r), result_json=json.dumps(result))


class CoordinatorServicer(pb_grpc.CoordinatorServiceServicer):
    def __init__(self, lifecycle: Lifecycle) -> None:
        self._life = lifecycle
        self._store = lifecycle.store

    def SubmitJob(self, request, context):  # noqa: N802
        try:
            return pb.SubmitJobResponse(job_id=self._life.submit(request.spec_yaml))
        except CoordinatorError as exc:
            _abort(context, exc)

    def ListJobs(self, request, context):  # noqa: N802
        return pb.ListJobsResponse(jobs=[_summary(r) for r in self._store.list()])

    def GetJob(self, request, context):  # noqa: N802
        try:
            return _view(self._store.get(request.job_id))
        except CoordinatorError as exc:
            _abort(context, exc)

    def WatchJob(self, request, context):  # noqa: N802
        last = None
        while context.is_active():
            try:
                record = self._store.get(request.job_id)
            except CoordinatorError as exc:
                _abort(context, exc)
            if record.updated_at != last:
                last = record.updated_at
                yield _view(record)
            if record.terminal:
                return
            time.sleep(WATCH_POLL_S)

    def CancelJob(self, request, context):  # noqa: N802
        try:
            return pb.CancelJobResponse(state=self._life.cancel(request.job_id))
        except CoordinatorError as exc:
            _abort(context, exc)

    def RegisterParty(self, request, context):  # noqa: N802
        if not request.party_id or not request.address:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "party_id and address are required")
        self._store.register_party(request.party_id, request.address, list(request.datasets))
        return pb.RegisterPartyResponse()

    def ReportProgress(self, request, context):  # noqa: N802
        try:
            payload = json.loads(request.payload_json or "{}")
            if not isinstance(payload, dict):
                raise SpecError("payload_json must be a JSON object")
            stop = self._life.report(
                request.job_id, request.party_id, request.event, request.state, payload
            )
            return pb.ReportProgressResponse(cancel=stop)
        except json.JSONDecodeError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"payload_json is not JSON: {exc}")
        except CoordinatorError as exc:
            _abort(context, exc)
