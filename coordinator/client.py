"""A typed client of the coordinator service, used by the CLI and by party daemons.

With TLS, the coordinator's certificate must name the identity `coordinator`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import grpc

from proto import coordinator_pb2 as pb
from proto import coordinator_pb2_grpc as pb_grpc
from proto.rpc import COORDINATOR_ID, dial
from secure.pki.certs import PartyFiles


@dataclass(frozen=True)
class JobView:
    job_id: str
    name: str
    state: str
    reason: str
    created_at: float
    updated_at: float
    result: dict

    @staticmethod
    def from_proto(resp: pb.GetJobResponse) -> JobView:
        j = resp.job
        return JobView(
            j.job_id,
            j.name,
            j.state,
            j.reason,
            j.created_at,
            j.updated_at,
            json.loads(resp.result_json or "{}"),
        )


class CoordinatorClient:
    """Thin wrapper; RPC errors surface as `grpc.RpcError` with the server's message."""

    def __init__(self, address: str, tls: PartyFiles | None = None, timeout: float = 30.0):
        self.address = address
        self.tls = tls
        self._channel = dial(address, tls, expect=COORDINATOR_ID)
        self._stub = pb_grpc.CoordinatorServiceStub(self._channel)
        self._timeout = timeout

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> CoordinatorClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def wait_ready(self, timeout: float) -> None:
        grpc.channel_ready_future(self._channel).result(timeout=timeout)

    def submit(self, spec_yaml: str) -> str:
        req = pb.SubmitJobRequest(spec_yaml=spec_yaml)
        return self._stub.SubmitJob(req, timeout=self._timeout).job_id

    def jobs(self) -> list[pb.JobSummary]:
        return list(self._stub.ListJobs(pb.ListJobsRequest(), timeout=self._timeout).jobs)

    def get(self, job_id: str) -> JobView:
        resp = self._stub.GetJob(pb.GetJobRequest(job_id=job_id), timeout=self._timeout)
        return JobView.from_proto(resp)

    def watch(self, job_id: str) -> Iterator[JobView]:
        for resp in self._stub.WatchJob(pb.WatchJobRequest(job_id=job_id)):
            yield JobView.from_proto(resp)

    def cancel(self, job_id: str) -> str:
        return self._stub.CancelJob(pb.CancelJobRequest(job_id=job_id), timeout=self._timeout).state

    def register(self, party_id: str, address: str, datasets: list[str]) -> None:
        req = pb.RegisterPartyRequest(party_id=party_id, address=address, datasets=datasets)
        self._stub.RegisterParty(req, timeout=self._timeout)

    def report(
        self, job_id: str, party_id: str, event: str, state: str = "", payload: dict | None = None
    ) -> bool:
        """Send a progress report; returns True if the coordinator says to stop the job."""
        req = pb.ReportProgressRequest(
            job_id=job_id,
            party_id=party_id,
            event=event,
            state=state,
            payload_json=json.dumps(payload or {}),
        )
        return self._stub.ReportProgress(req, timeout=self._timeout).cancel
