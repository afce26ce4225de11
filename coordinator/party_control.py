"""The coordinator's calls to party daemons: PrepareJob, StartJob, AbortJob, GetPartyInfo,
ListCheckpoints, ListModelParts, DeleteModelPart.

Only control messages: job ids, the validated spec, peers' addresses, reasons, summaries
of model parts. A party that cannot be reached becomes `PartyUnavailable` naming the party
and what to check; the model calls, which many parties answer at once, give None for it.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import grpc
from vfl.contract.errors import party_named
from vfl.contract.spec import JobSpec
from vfl.coordinator.errors import PartyBusy, PartyRefused, PartyUnavailable, PartyUnregistered
from vfl.coordinator.store import JobStore
from vfl.proto import party_pb2
from vfl.rpc import PeerClients, explain

log = logging.getLogger(__name__)

CONTROL_TIMEOUT_S = 60.0
MODELS_TIMEOUT_S = 3.0  # how long `vfl models` waits for a party's answer
# what a party answers when it refuses the input of a job (data, model, config), not a fault
REFUSALS = (
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
)


class PartyControl:
    """Args:
    store: the job database (the party registry: who listens where).
    clients: gRPC clients of the party daemons.
    control_timeout_s: deadline of a control call (StartJob), and how long PrepareJob and
        StartJob wait for a party's channel to connect: a party that just restarted is
        reached once the channel's reconnect back-off ends, not called unreachable.
        PrepareJob, which loads and checks a party's table, may take as long as the
        job's own ``train.timeout_s`` when that is longer: a big table loads for minutes,
        and the health monitor notices a party that dies meanwhile.
    """

    def __init__(
        self, store: JobStore, clients: PeerClients, control_timeout_s: float = CONTROL_TIMEOUT_S
    ) -> None:
        self._store = store
        self._clients = clients
        self._timeout_s = control_timeout_s

    @property
    def clients(self) -> PeerClients:
        """The channels to the parties (with the coordinator's TLS identity)."""
        return self._clients

    def addresses(self, spec: JobSpec) -> dict[str, str]:
        """Where each party of `spec` listens.

        Raises:
            PartyUnregistered: a party never registered.
        """
        known = self._store.parties()
        missing = [p.id for p in spec.parties if p.id not in known]
        if missing:
            raise PartyUnregistered(
                f"part{'ies' if len(missing) > 1 else 'y'} {missing} never registered with "
                "this coordinator; start each with `vfl party serve --config party.yaml` "
                "pointing its 'coordinator' at this coordinator",
                missing,
            )
        return {p.id: known[p.id] for p in spec.parties}

    def prepare_all(
        self,
        job_id: str,
        spec_json: str,
        spec: JobSpec,
        addresses: dict[str, str],
        resume_round: int = 0,
    ) -> None:
        """PrepareJob on every party at once: launching waits for the slowest load, not
        their sum.

        Raises:
            PartyUnavailable: the first party (in spec order) that could not prepare,
                once every party has answered; `PartyRefused` when it refused the job's
                input.
            PartyBusy: a party cannot take the job yet (the job waits QUEUED).
        """
        peers = [party_pb2.PeerAddress(party_id=k, address=v) for k, v in addresses.items()]
        request = party_pb2.PrepareJobRequest(
            job_id=job_id, spec_json=spec_json, peers=peers, resume_round=resume_round
        )
        deadline = max(self._timeout_s, spec.train.timeout_s)
        with ThreadPoolExecutor(len(spec.parties), thread_name_prefix="prepare") as pool:
            futures = [
                pool.submit(self._call, p.id, addresses[p.id], "PrepareJob", request, deadline)
                for p in spec.parties
            ]
        errors = [f.exception() for f in futures]
        failed = [e for e in errors if e is not None]
        if failed:  # a party that cannot run the job at all outranks one that is busy
            raise next((e for e in failed if not isinstance(e, PartyBusy)), failed[0])

    def start_all(self, job_id: str, spec: JobSpec, addresses: dict[str, str]) -> None:
        """Raises: PartyUnavailable: a party could not start the job."""
        request = party_pb2.StartJobRequest(job_id=job_id)
        for p in spec.parties:
            self._call(p.id, addresses[p.id], "StartJob", request)

    def abort_all(self, job_id: str, spec: JobSpec, reason: str) -> None:
        """Tell every registered party of `spec` to drop the job; never raises."""
        known = self._store.parties()
        request = party_pb2.AbortJobRequest(job_id=job_id, reason=reason)
        for p in spec.parties:
            if p.id in known:
                try:
                    self._clients.stub(known[p.id], p.id).AbortJob(request, timeout=5)
                except grpc.RpcError:
                    pass  # an unreachable party has nothing left to stop

    def checkpoints(
        self, job_id: str, spec_json: str, spec: JobSpec, addresses: dict[str, str]
    ) -> dict[str, dict[int, str]]:
        """Per party, the rounds of `job_id` it holds a checkpoint of, each with "" if
        usable, else why not.

        Raises:
            PartyUnavailable: a party did not answer.
        """
        request = party_pb2.ListCheckpointsRequest(job_id=job_id, spec_json=spec_json)
        held: dict[str, dict[int, str]] = {}
        for p in spec.parties:
            response = cast(
                party_pb2.ListCheckpointsResponse,
                self._call(p.id, addresses[p.id], "ListCheckpoints", request),
            )
            held[p.id] = {c.round: c.problem for c in response.checkpoints}
        return held

    def running_jobs(self, party_id: str, address: str) -> list[str]:
        """The jobs a party holds (loading, prepared or started).

        Raises:
            grpc.RpcError: the party did not answer within 5 s.
        """
        return list(self.info(party_id, address).running_jobs)

    def info(
        self, party_id: str, address: str, within: float = 5.0, wait_for_ready: bool = False
    ) -> party_pb2.GetPartyInfoResponse:
        """Raises: grpc.RpcError: the party did not answer `within` seconds (with
        `wait_for_ready`, a channel still reconnecting gets that long)."""
        info: party_pb2.GetPartyInfoResponse = self._clients.stub(address, party_id).GetPartyInfo(
            party_pb2.GetPartyInfoRequest(), timeout=within, wait_for_ready=wait_for_ready
        )
        return info

    def check_answering(
        self, spec: JobSpec, addresses: dict[str, str], within: float = 5.0
    ) -> None:
        """Every party of `spec` answers within `within` seconds (a channel still
        reconnecting to a restarted party gets that long).

        Raises:
            PartyUnavailable: naming the parties that do not answer and what to do.
        """
        silent = []
        for p in spec.parties:
            try:
                self.info(p.id, addresses[p.id], within, wait_for_ready=True)
            except grpc.RpcError:
                silent.append(f"'{p.id}' at {addresses[p.id]}")
        if silent:
            raise PartyUnavailable(
                f"part{'ies' if len(silent) > 1 else 'y'} {', '.join(silent)} did not answer "
                f"within {within:.0f} s; start the daemon again (it registers by itself), "
                "then retry"
            )

    def model_parts(
        self, party_ids: Collection[str], within: float = MODELS_TIMEOUT_S
    ) -> dict[str, list[party_pb2.ModelPart] | None]:
        """Per party, the model parts it keeps; None for a party that is not registered
        or did not answer within `within` seconds. The parties are asked at once."""
        request = party_pb2.ListModelPartsRequest()
        answers = self._ask_each(party_ids, "ListModelParts", request, within)
        return {p: None if a is None else list(a.parts) for p, a in answers.items()}

    def delete_model_parts(
        self, model_id: str, party_ids: Collection[str], within: float = MODELS_TIMEOUT_S
    ) -> dict[str, bool | None]:
        """Tell each party to drop its part of `model_id`, all at once; per party whether
        it held one, None if it is not registered or did not answer within `within` s."""
        request = party_pb2.DeleteModelPartRequest(model_id=model_id)
        answers = self._ask_each(party_ids, "DeleteModelPart", request, within)
        return {p: None if a is None else a.held for p, a in answers.items()}

    def _ask_each(
        self, party_ids: Collection[str], method: str, request: object, within: float
    ) -> dict[str, Any]:
        """`method(request)` at every registered party of `party_ids` in parallel; per
        party its answer, None for no answer (a channel still reconnecting gets `within`)."""
        known = self._store.parties()
        answers: dict[str, Any] = dict.fromkeys(party_ids)
        asked = [p for p in party_ids if p in known]
        if not asked:
            return answers
        with ThreadPoolExecutor(len(asked), thread_name_prefix="ask") as pool:
            futures = {
                p: pool.submit(self._ask, p, known[p], method, request, within) for p in asked
            }
        answers.update({p: f.result() for p, f in futures.items()})
        return answers

    def _ask(self, party_id: str, address: str, method: str, request: object, within: float):
        stub = self._clients.stub(address, party_id)
        try:
            return getattr(stub, method)(request, timeout=within, wait_for_ready=True)
        except grpc.RpcError as exc:
            quiet = exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
            why = self.explain(exc, address, party_id)
            log.log(
                logging.INFO if quiet else logging.WARNING,
                "party %s: %s: %s",
                party_id,
                method,
                why,
            )
            return None

    def explain(self, exc: grpc.RpcError, address: str, party_id: str) -> str:
        return explain(exc, address, self._clients.tls, party_id)

    def _call(
        self,
        party_id: str,
        address: str,
        method: str,
        request: object,
        timeout: float | None = None,
    ) -> object:
        deadline = timeout or self._timeout_s
        # wait for the channel first; if it never connects, the call fails at once with
        # gRPC's reason (refused, TLS handshake, ...) for the message below
        ready = self._clients.ready(address, party_id, min(deadline, self._timeout_s))
        stub = self._clients.stub(address, party_id)
        try:
            return getattr(stub, method)(request, timeout=deadline, wait_for_ready=ready)
        except grpc.RpcError as exc:
            if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                why = self.explain(exc, address, party_id)
                raise PartyUnavailable(
                    f"party '{party_id}' at {address} is not reachable ({exc.code().name}: "
                    f"{why}); check that its daemon is running and the address is right"
                ) from None
            said = party_named(party_id, exc.details() or exc.code().name)
            if exc.code() in REFUSALS:
                raise PartyRefused(said) from None
            if exc.code() == grpc.StatusCode.ABORTED and method == "PrepareJob":
                raise PartyBusy(said) from None
            # RESOURCE_EXHAUSTED: the job is over one of the party's limits; it fails
            raise PartyUnavailable(said) from None
