"""The CoordinatorService servicer: translate protobufs to `Lifecycle`/`JobStore` calls.

It runs on the coordinator's `grpc.aio` event loop (`coordinator.server`) and never blocks
it: store reads, life-cycle calls and permission checks run in worker threads (`Pools`),
and `WatchJob` follows a job through `coordinator.watch`, holding no thread while it waits.
Domain errors become statuses with their message (unexpected ones INTERNAL, never a
crash). With TLS, RegisterParty and ReportProgress for party X are accepted only from X's
certificate; the user RPCs (submit, list, get, report, watch, cancel, resume, and the models' list,
get and delete) as `coordinator.access` says: a party reads the jobs and models it is in, an
operator (e.g. `admin`) may do everything.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
from vfl.contract.errors import SpecError
from vfl.contract.spec.predict import parse_predict_text
from vfl.coordinator.access import Access
from vfl.coordinator.errors import (
    AccessDenied,
    CoordinatorError,
    PartyUnavailable,
    UnknownJob,
    UnknownModel,
)
from vfl.coordinator.federation import check_federation
from vfl.coordinator.lifecycle import Lifecycle
from vfl.coordinator.store import JobRecord
from vfl.coordinator.views import report, summary, view
from vfl.coordinator.watch import JobFeeds
from vfl.proto import coordinator_pb2 as pb
from vfl.proto import coordinator_pb2_grpc as pb_grpc
from vfl.proto.rpc import call_with_status_async, check_caller_async, identify_caller_async

T = TypeVar("T")
WATCH_POLL_S = 0.2  # a followed job is read this often, and at once after a report

_CODES: list[tuple[type[Exception], grpc.StatusCode]] = [
    (AccessDenied, grpc.StatusCode.PERMISSION_DENIED),
    (SpecError, grpc.StatusCode.INVALID_ARGUMENT),
    (UnknownJob, grpc.StatusCode.NOT_FOUND),
    (UnknownModel, grpc.StatusCode.NOT_FOUND),
    (PartyUnavailable, grpc.StatusCode.FAILED_PRECONDITION),  # a party, not this daemon
    (CoordinatorError, grpc.StatusCode.INVALID_ARGUMENT),
    (ValueError, grpc.StatusCode.INVALID_ARGUMENT),
]


@dataclass(frozen=True)
class Pools:
    """Worker threads for the calls that may block, one pool per kind of caller, so that
    users' cancels (which call the parties, with 5 s deadlines) hold up neither the
    parties' reports nor anyone's reads. A call holds a thread only while it runs."""

    reads: ThreadPoolExecutor  # ListJobs, GetJob, GetJobReport, the job feeds of WatchJob
    parties: ThreadPoolExecutor  # RegisterParty, ReportProgress
    # SubmitJob, CancelJob, ResumeJob, and the model RPCs (they ask the parties, 3 s each)
    commands: ThreadPoolExecutor

    @classmethod
    def create(cls) -> Pools:
        return cls(
            ThreadPoolExecutor(4, thread_name_prefix="coordinator-read"),
            ThreadPoolExecutor(8, thread_name_prefix="coordinator-report"),
            ThreadPoolExecutor(8, thread_name_prefix="coordinator-command"),
        )

    def shutdown(self) -> None:
        """Wait for the calls in progress (each bounded by its deadlines)."""
        for pool in (self.reads, self.parties, self.commands):
            pool.shutdown(wait=True, cancel_futures=True)


class CoordinatorServicer(pb_grpc.CoordinatorServiceServicer):
    """Args:
    lifecycle: the job life cycle (and its store).
    pools: worker threads for blocking calls (`Pools.create()` if None).
    poll_s: how often a followed job is read when no report or cancel said it changed.
    """

    def __init__(
        self, lifecycle: Lifecycle, pools: Pools | None = None, poll_s: float = WATCH_POLL_S
    ) -> None:
        self._life = lifecycle
        self._store = lifecycle.store
        self._access = Access(self._store, lifecycle.spec)
        self.pools = pools or Pools.create()
        self.feeds = JobFeeds(
            lambda job_id: self._off_loop(self.pools.reads, self._store.get, job_id), poll_s
        )

    def close(self) -> None:
        """Stop following jobs (the server is stopping). Call on the event loop."""
        self.feeds.close()

    async def _off_loop(self, pool: ThreadPoolExecutor, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)

    async def _call(
        self,
        context: grpc.aio.ServicerContext,
        pool: ThreadPoolExecutor,
        fn: Callable[..., T],
        *args: Any,
    ) -> T:
        """`fn(*args)` in a thread of `pool`; its errors become statuses by `_CODES`."""
        return await call_with_status_async(context, self._off_loop(pool, fn, *args), _CODES)

    # --- user RPCs ---------------------------------------------------------------------

    async def SubmitJob(self, request, context):  # noqa: N802
        caller = await identify_caller_async(context)
        job_id = await self._call(
            context, self.pools.commands, self._submit, caller, request.spec_yaml
        )
        return pb.SubmitJobResponse(job_id=job_id)

    async def SubmitPrediction(self, request, context):  # noqa: N802
        caller = await identify_caller_async(context)
        job_id = await self._call(
            context, self.pools.commands, self._predict, caller, request.spec_yaml
        )
        return pb.SubmitJobResponse(job_id=job_id)

    async def LocateModel(self, request, context):  # noqa: N802
        caller = await identify_caller_async(context)
        party, address = await self._call(
            context, self.pools.reads, self._locate, caller, request.model_id
        )
        return pb.LocateModelResponse(party_id=party, address=address)

    async def ListJobs(self, request, context):  # noqa: N802
        caller = await identify_caller_async(context)
        records = await self._call(context, self.pools.reads, self._list, caller)
        return pb.ListJobsResponse(jobs=[summary(r) for r in records])

    async def GetJob(self, request, context):  # noqa: N802
        caller = await identify_caller_async(context)
        return view(await self._call(context, self.pools.reads, self._get, caller, request.job_id))

    async def GetJobReport(self, request, context):  # noqa: N802
        caller = await identify_caller_async(context)
        return await self._call(context, self.pools.reads, self._report, caller, request.job_id)

    async def WatchJob(self, request, context):  # noqa: N802
        caller = await identify_caller_async(context)
        await self._call(context, self.pools.reads, self._get, caller, request.job_id)
        follow = self.feeds.follow(request.job_id)
        try:
            while record := await call_with_status_async(context, anext(follow, None), _CODES):
                yield view(record)
        finally:
            await follow.aclose()

    async def CancelJob(self, request, context):  # noqa: N802
        caller = await identify_caller_async(context)
        state = await self._call(context, self.pools.commands, self._cancel, caller, request.job_id)
        self.feeds.changed(request.job_id)
        return pb.CancelJobResponse(state=state)

    async def ResumeJob(self, request, context):  # noqa: N802
        caller = await identify_caller_async(context)
        state, rnd = await self._call(
            context, self.pools.commands, self._resume, caller, request.job_id
        )
        self.feeds.changed(request.job_id)
        return pb.ResumeJobResponse(state=state, round=rnd)

    async def ListModels(self, request, context):  # noqa: N802
        caller = await identify_caller_async(context)
        models = await self._call(context, self.pools.commands, self._models, caller)
        return pb.ListModelsResponse(models=models)

    async def GetModel(self, request, context):  # noqa: N802
        caller = await identify_caller_async(context)
        model = await self._call(
            context, self.pools.commands, self._model, caller, request.model_id
        )
        return pb.GetModelResponse(model=model)

    async def DeleteModel(self, request, context):  # noqa: N802
        caller = await identify_caller_async(context)
        model = await self._call(
            context, self.pools.commands, self._delete_model, caller, request.model_id
        )
        return pb.DeleteModelResponse(model=model)

    # --- party RPCs --------------------------------------------------------------------

    async def CheckFederation(self, request, context):  # noqa: N802
        caller = await identify_caller_async(context)
        return await self._call(context, self.pools.commands, self._check_federation, caller)

    async def RegisterParty(self, request, context):  # noqa: N802
        await check_caller_async(
            context, request.party_id, f"register as party '{request.party_id}'"
        )
        await self._call(
            context,
            self.pools.parties,
            self._life.register,
            request.party_id,
            request.address,
            list(request.datasets),
        )
        return pb.RegisterPartyResponse()

    async def ReportProgress(self, request, context):  # noqa: N802
        party = request.party_id
        await check_caller_async(context, party, f"report progress as party '{party}'")
        stop = await self._call(context, self.pools.parties, self._life.report, party, request)
        self.feeds.changed(request.job_id)
        return pb.ReportProgressResponse(cancel=stop)

    # --- in worker threads -------------------------------------------------------------

    def _check_federation(self, caller: str | None) -> pb.CheckFederationResponse:
        self._access.check_operator(caller, "check the federation (vfl doctor)")
        return check_federation(self._store, self._life.control.clients)

    def _submit(self, caller: str | None, spec_yaml: str) -> str:
        self._access.check_submit(caller, spec_yaml)
        return self._life.submit(spec_yaml)

    def _predict(self, caller: str | None, spec_yaml: str) -> str:
        request = parse_predict_text(spec_yaml)
        try:
            self._access.check_predict(caller, request.model)
            return self._life.submit_prediction(request, spec_yaml)
        except UnknownJob:
            raise UnknownModel(f"no model {request.model}; list them with `vfl models`") from None

    def _locate(self, caller: str | None, model_id: str) -> tuple[str, str]:
        self._access.check_read(caller, model_id)
        return self._life.locate_model(model_id)

    def _list(self, caller: str | None) -> list[JobRecord]:
        return self._access.visible(caller, self._store.list())

    def _get(self, caller: str | None, job_id: str) -> JobRecord:
        record = self._store.get(job_id)
        self._access.check_read(caller, job_id)
        return record

    def _report(self, caller: str | None, job_id: str) -> pb.GetJobReportResponse:
        return report(self._store, self._get(caller, job_id))

    def _cancel(self, caller: str | None, job_id: str) -> int:
        self._access.check_control(caller, job_id, "cancel")
        return self._life.cancel(job_id)

    def _resume(self, caller: str | None, job_id: str) -> tuple[int, int]:
        self._access.check_control(caller, job_id, "resume")
        return self._life.resume(job_id)

    def _models(self, caller: str | None) -> list[pb.ModelSummary]:
        models = self._life.models
        return models.list(self._access.visible(caller, models.records()))

    def _model(self, caller: str | None, model_id: str) -> pb.ModelSummary:
        record = self._life.models.record(model_id)
        self._access.check_model_read(caller, model_id)
        return self._life.models.get(record)

    def _delete_model(self, caller: str | None, model_id: str) -> pb.ModelSummary:
        record = self._life.models.record(model_id)
        self._access.check_delete_model(caller, model_id)
        return self._life.models.delete(record)
