"""The CoordinatorService servicer: translate protobufs to `Lifecycle`/`JobStore` calls.

Each unary RPC is a method decorated with `coordinator.calls.unary`: its body runs in a
worker thread (store reads, life-cycle calls and permission checks never block the
coordinator's `grpc.aio` event loop), and the decorator finds the caller, turns domain
errors into statuses and builds the response. `WatchJob` follows a job through
`coordinator.watch`, holding no thread while it waits. With TLS, RegisterParty and
ReportProgress for party X are accepted only from X's certificate; the user RPCs (submit,
list, get, report, watch, cancel, resume, and the models' list, get and delete) as
`coordinator.access` says: a party reads the jobs and models it is in, an operator (e.g.
`admin`) may do everything.
"""

from __future__ import annotations

from vfl.contract.spec import parse_spec_text
from vfl.contract.spec.predict import parse_predict_text
from vfl.contract.states import JobState
from vfl.coordinator.access import Access
from vfl.coordinator.calls import CODES, Pools, caller_of, in_thread, off_loop, unary
from vfl.coordinator.errors import of_model
from vfl.coordinator.federation import check_federation
from vfl.coordinator.lifecycle import Lifecycle
from vfl.coordinator.store import JobRecord
from vfl.coordinator.views import report, summary, view
from vfl.coordinator.watch import JobFeeds
from vfl.proto import coordinator_pb2 as pb, coordinator_pb2_grpc as pb_grpc
from vfl.rpc import call_with_status_async

__all__ = ["WATCH_POLL_S", "CoordinatorServicer", "Pools"]

WATCH_POLL_S = 0.2  # a followed job is read this often, and at once after a report


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
            lambda job_id: off_loop(self.pools.reads, self._store.get, job_id), poll_s
        )

    def close(self) -> None:
        """Stop following jobs (the server is stopping). Call on the event loop."""
        self.feeds.close()

    # --- user RPCs (in worker threads, `unary`) ------------------------------------------

    @unary("commands", lambda job_id: pb.SubmitJobResponse(job_id=job_id))
    def SubmitJob(self, caller: str | None, request: pb.SubmitJobRequest) -> str:  # noqa: N802
        spec = parse_spec_text(request.spec_yaml)  # the one parse: who may, then the job
        self._access.check_submit(caller, spec)
        return self._life.submit(request.spec_yaml, spec)

    @unary("commands", lambda job_id: pb.SubmitJobResponse(job_id=job_id))
    def SubmitPrediction(  # noqa: N802
        self, caller: str | None, request: pb.SubmitPredictionRequest
    ) -> str:
        predict = parse_predict_text(request.spec_yaml)
        with of_model(predict.model):
            self._access.check_predict(caller, predict.model)
            return self._life.submit_prediction(predict, request.spec_yaml)

    @unary("reads", lambda found: pb.LocateModelResponse(party_id=found[0], address=found[1]))
    def LocateModel(  # noqa: N802
        self, caller: str | None, request: pb.LocateModelRequest
    ) -> tuple[str, str]:
        with of_model(request.model_id):
            self._access.check_read(caller, request.model_id)
            return self._life.locate_model(request.model_id)

    @unary("reads", lambda found: pb.LocatePartiesResponse(addresses=found))
    def LocateParties(  # noqa: N802
        self, caller: str | None, request: pb.LocatePartiesRequest
    ) -> dict[str, str]:
        with of_model(request.model_id):
            self._access.check_read(caller, request.model_id)  # a party of it, or operator
            return self._life.locate_parties(request.model_id)

    @unary("reads", lambda records: pb.ListJobsResponse(jobs=[summary(r) for r in records]))
    def ListJobs(self, caller: str | None, request: pb.ListJobsRequest) -> list[JobRecord]:  # noqa: N802
        return self._access.visible(caller, self._store.jobs())

    @unary("reads", view)
    def GetJob(self, caller: str | None, request: pb.GetJobRequest) -> JobRecord:  # noqa: N802
        return self._readable(caller, request.job_id)

    @unary("reads")
    def GetJobReport(  # noqa: N802
        self, caller: str | None, request: pb.GetJobReportRequest
    ) -> pb.GetJobReportResponse:
        return report(self._store, self._readable(caller, request.job_id))

    async def WatchJob(self, request, context):  # noqa: N802
        caller = await caller_of(context, request)
        await in_thread(context, self.pools.reads, self._readable, caller, request.job_id)
        follow = self.feeds.follow(request.job_id)
        try:
            while record := await call_with_status_async(context, anext(follow, None), CODES):
                yield view(record)
        finally:
            await follow.aclose()

    @unary("commands", lambda state: pb.CancelJobResponse(state=state), changes_job=True)
    def CancelJob(self, caller: str | None, request: pb.CancelJobRequest) -> JobState:  # noqa: N802
        self._access.check_control(caller, request.job_id, "cancel")
        return self._life.cancel(request.job_id)

    @unary("commands", lambda s: pb.ResumeJobResponse(state=s[0], round=s[1]), changes_job=True)
    def ResumeJob(  # noqa: N802
        self, caller: str | None, request: pb.ResumeJobRequest
    ) -> tuple[JobState, int]:
        self._access.check_control(caller, request.job_id, "resume")
        return self._life.resume(request.job_id)

    @unary("commands", lambda models: pb.ListModelsResponse(models=models))
    def ListModels(  # noqa: N802
        self, caller: str | None, request: pb.ListModelsRequest
    ) -> list[pb.ModelSummary]:
        models = self._life.models
        return models.summaries(self._access.visible(caller, models.records()))

    @unary("commands", lambda model: pb.GetModelResponse(model=model))
    def GetModel(self, caller: str | None, request: pb.GetModelRequest) -> pb.ModelSummary:  # noqa: N802
        record = self._life.models.record(request.model_id)
        self._access.check_model_read(caller, request.model_id)
        return self._life.models.get(record)

    @unary("commands", lambda model: pb.DeleteModelResponse(model=model))
    def DeleteModel(  # noqa: N802
        self, caller: str | None, request: pb.DeleteModelRequest
    ) -> pb.ModelSummary:
        record = self._life.models.record(request.model_id)
        self._access.check_delete_model(caller, request.model_id)
        return self._life.models.delete(record)

    # --- party RPCs --------------------------------------------------------------------

    @unary("commands")
    def CheckFederation(  # noqa: N802
        self, caller: str | None, request: pb.CheckFederationRequest
    ) -> pb.CheckFederationResponse:
        self._access.check_operator(caller, "check the federation (vfl doctor)")
        return check_federation(self._store, self._life.control.clients)

    @unary("parties", lambda _: pb.RegisterPartyResponse(), as_party="register")
    def RegisterParty(self, party: str, request: pb.RegisterPartyRequest) -> None:  # noqa: N802
        self._life.register(party, request.address, list(request.datasets))

    @unary(
        "parties",
        lambda stop: pb.ReportProgressResponse(cancel=stop),
        as_party="report progress",
        changes_job=True,
    )
    def ReportProgress(self, party: str, request: pb.ReportProgressRequest) -> bool:  # noqa: N802
        return self._life.report(party, request)

    # --- helpers (in worker threads) ---------------------------------------------------

    def _readable(self, caller: str | None, job_id: str) -> JobRecord:
        """Job `job_id`, if `caller` may read it.

        Raises:
            UnknownJob: no such job. AccessDenied: the caller is not in the job.
        """
        record = self._store.get(job_id)
        self._access.check_read(caller, job_id)
        return record
