"""A typed client of the coordinator service, used by the Python API (`vfl.Client`) and
by party daemons.

With TLS, the coordinator's certificate must name the identity `coordinator`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc
from vfl.contract.states import TERMINAL, JobState, model_state_name, state_name
from vfl.coordinator.errors import CoordinatorLost
from vfl.proto import coordinator_pb2 as pb, coordinator_pb2_grpc as pb_grpc
from vfl.rpc import COORDINATOR_ID, ChannelCache, Tls
from vfl.rpc.serde import to_plain

ENDED = tuple(state_name(s) for s in sorted(TERMINAL))  # a job's last states, by name
# how a stream that was running breaks when the coordinator's process stops or restarts
_LOST = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.UNKNOWN)


@dataclass(frozen=True)
class Job:
    """A job as the job list shows it: its state by name ("TRAINING"), reason, unix times."""

    job_id: str
    name: str
    state: str
    reason: str
    created_at: float
    updated_at: float

    @staticmethod
    def from_proto(job: pb.JobSummary) -> Job:
        return Job(
            job.job_id, job.name, state_name(job.state), job.reason, job.created_at, job.updated_at
        )


@dataclass(frozen=True)
class JobView(Job):
    """A job as a user sees it: a `Job` with its typed result."""

    result: pb.JobResult

    @staticmethod
    def from_response(resp: pb.GetJobResponse) -> JobView:
        return JobView(**vars(Job.from_proto(resp.job)), result=resp.result)

    def to_plain(self) -> dict[str, Any]:
        """The job as `vfl ... --json` prints it: its result's fields, its state and reason;
        each validation's metrics inline, as {"round", "seconds", ..., "auc"}."""
        out = {k: v for k, v in to_plain(self.result).items() if k != "started_at"}
        out.update(job=self.job_id, state=self.state)
        if self.reason:
            out["reason"] = self.reason
        out["history"] = [{**h, **h.pop("metrics", {})} for h in out.get("history", [])]
        return out


def model_to_plain(model: pb.ModelSummary) -> dict[str, Any]:
    """A model as `vfl models --json` prints it: every field, its state by name
    ("available")."""
    return {**to_plain(model), "state": model_state_name(model.state)}


class CoordinatorClient:
    """Thin wrapper; RPC errors surface as `grpc.RpcError` with the server's message."""

    def __init__(self, address: str, tls: Tls | None = None, timeout: float = 30.0):
        self.address = address
        self._channels = ChannelCache(tls)  # dialled again when the identity rotates
        self.tls = self._channels.tls
        self._stubs: tuple[grpc.Channel, pb_grpc.CoordinatorServiceStub] | None = None
        self._timeout = timeout

    @property
    def _stub(self) -> pb_grpc.CoordinatorServiceStub:
        channel = self._channels.channel(self.address, COORDINATOR_ID)
        if self._stubs is None or self._stubs[0] is not channel:
            self._stubs = (channel, pb_grpc.CoordinatorServiceStub(channel))
        return self._stubs[1]

    def close(self) -> None:
        self._channels.close()

    def __enter__(self) -> CoordinatorClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def submit(self, spec_yaml: str) -> str:
        req = pb.SubmitJobRequest(spec_yaml=spec_yaml)
        return self._stub.SubmitJob(req, timeout=self._timeout).job_id

    def predict(self, spec_yaml: str) -> str:
        """Submit a prediction spec (`vfl.contract.spec.predict`); returns the job's id."""
        req = pb.SubmitPredictionRequest(spec_yaml=spec_yaml)
        return self._stub.SubmitPrediction(req, timeout=self._timeout).job_id

    def check_federation(self) -> pb.CheckFederationResponse:
        """The registered parties, their answers and data-plane pings (`vfl doctor`)."""
        resp: pb.CheckFederationResponse = self._stub.CheckFederation(
            pb.CheckFederationRequest(), timeout=max(self._timeout, 60.0)
        )
        return resp

    def locate_model(self, model_id: str) -> tuple[str, str]:
        """The active party of model `model_id` and its registered address."""
        req = pb.LocateModelRequest(model_id=model_id)
        resp = self._stub.LocateModel(req, timeout=self._timeout)
        return resp.party_id, resp.address

    def jobs(self) -> list[pb.JobSummary]:
        return list(self._stub.ListJobs(pb.ListJobsRequest(), timeout=self._timeout).jobs)

    def get(self, job_id: str) -> JobView:
        resp = self._stub.GetJob(pb.GetJobRequest(job_id=job_id), timeout=self._timeout)
        return JobView.from_response(resp)

    def job_report(self, job_id: str) -> pb.GetJobReportResponse:
        """The job with its spec and per-round curves (what `vfl report` draws)."""
        req = pb.GetJobReportRequest(job_id=job_id)
        resp: pb.GetJobReportResponse = self._stub.GetJobReport(req, timeout=self._timeout)
        return resp

    def watch(self, job_id: str) -> Iterator[JobView]:
        """The job's views as `WatchJob` streams them (see `views` for following a job)."""
        for resp in self._stub.WatchJob(pb.WatchJobRequest(job_id=job_id)):
            yield JobView.from_response(resp)

    def views(self, job_id: str) -> Iterator[JobView]:
        """Follow job `job_id` until it ends: its views as the coordinator sends them, the
        last one ended (a stream with no view at all yields the job as it is once).

        Raises:
            CoordinatorLost: the coordinator went away after the watch began (the stream
                broke, or ended before the job did).
            grpc.RpcError: the watch could not begin (unreachable, TLS handshake, no job).
        """
        last: JobView | None = None
        try:
            for view in self.watch(job_id):
                last = view
                yield view
        except grpc.RpcError as exc:
            if last is None or exc.code() not in _LOST:
                raise
            raise CoordinatorLost(self._lost(job_id, last)) from None
        if last is None:
            yield self.get(job_id)
        elif last.state not in ENDED:
            raise CoordinatorLost(self._lost(job_id, last))

    def _lost(self, job_id: str, last: JobView) -> str:
        return (
            f"the connection to the coordinator at {self.address} was lost (it stopped or "
            f"restarted) while job {job_id} was {last.state}"
        )

    def cancel(self, job_id: str) -> str:
        """Cancel a job; returns the state it is in afterwards, by name."""
        req = pb.CancelJobRequest(job_id=job_id)
        state: JobState = self._stub.CancelJob(req, timeout=self._timeout).state
        return state_name(state)

    def resume(self, job_id: str) -> tuple[str, int]:
        """Resume a paused job; returns its state by name and the round it continues after."""
        resp = self._stub.ResumeJob(pb.ResumeJobRequest(job_id=job_id), timeout=self._timeout)
        return state_name(resp.state), resp.round

    def models(self) -> list[pb.ModelSummary]:
        """The models the federation holds (those deleted everywhere left out)."""
        return list(self._stub.ListModels(pb.ListModelsRequest(), timeout=self._timeout).models)

    def model(self, model_id: str) -> pb.ModelSummary:
        req = pb.GetModelRequest(model_id=model_id)
        return self._stub.GetModel(req, timeout=self._timeout).model

    def delete_model(self, model_id: str) -> pb.ModelSummary:
        """Delete a model at every party; returns it DELETED, or DELETING with the parties
        that did not answer (they drop their part when asked again)."""
        req = pb.DeleteModelRequest(model_id=model_id)
        return self._stub.DeleteModel(req, timeout=self._timeout).model

    def locate_parties(self, model_id: str, timeout: float | None = None) -> dict[str, str]:
        """Where the registered parties of model `model_id` listen now."""
        req = pb.LocatePartiesRequest(model_id=model_id)
        resp = self._stub.LocateParties(req, timeout=timeout or self._timeout)
        return dict(resp.addresses)

    def register(self, party_id: str, address: str, datasets: list[str]) -> None:
        req = pb.RegisterPartyRequest(party_id=party_id, address=address, datasets=datasets)
        self._stub.RegisterParty(req, timeout=self._timeout)

    def report(self, request: pb.ReportProgressRequest, timeout: float | None = None) -> bool:
        """Send a progress report; returns True if the coordinator says to stop the job."""
        return self._stub.ReportProgress(request, timeout=timeout or self._timeout).cancel
