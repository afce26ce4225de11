"""The job life cycle (DESIGN.md §3): submit, launch on the parties, progress, end states.

SUBMITTED -> ALIGNING -> TRAINING -> SUCCEEDED, or FAILED / CANCELLED with a reason.
The coordinator talks to parties over the control plane only; it never sees a payload.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor

import grpc

from coordinator.errors import CoordinatorError, PartyUnavailable, SpecError
from coordinator.reports import RUNNING, check_report
from coordinator.spec import JobSpec, parse_spec_text
from coordinator.store import JobStore
from proto import party_pb2
from proto.rpc import COORDINATOR_ID, PeerClients, explain
from secure.pki.certs import CertError, check_party_id

log = logging.getLogger(__name__)

CONTROL_TIMEOUT_S = 60.0
SPECS_KEPT = 256  # parsed specs of the most recently used jobs


class Lifecycle:
    """Args:
    store: the job database.
    parties: gRPC clients of the party daemons.
    control_timeout_s: deadline of a control call (StartJob). PrepareJob, which loads
        and checks a party's table, may take as long as the job's own ``train.timeout_s``
        when that is longer: a big table loads for minutes, and the health monitor
        notices a party that dies meanwhile.
    """

    def __init__(
        self, store: JobStore, parties: PeerClients, control_timeout_s: float = CONTROL_TIMEOUT_S
    ) -> None:
        self.store = store
        self._parties = parties
        self._control_timeout_s = control_timeout_s
        self._lock = threading.Lock()
        self._silent_since: dict[tuple[str, str], float] = {}
        # jobs being launched whose parties have not been sent PrepareJob yet: no party can
        # hold such a job, so the monitor only checks that its parties answer
        self._unprepared: set[str] = set()
        self._threads: list[threading.Thread] = []
        self._specs: OrderedDict[str, JobSpec] = OrderedDict()  # job id -> parsed spec
        self._specs_lock = threading.Lock()

    def _spec(self, job_id: str, spec_json: str, parsed: JobSpec | None = None) -> JobSpec:
        """A job's spec, parsed once: at submit (`parsed`) or at first use after a restart,
        not on every report and health tick. The most recently used `SPECS_KEPT` stay."""
        with self._specs_lock:
            spec = self._specs.pop(job_id, parsed)
            if spec is None:
                spec = JobSpec.from_json(spec_json)
            self._specs[job_id] = spec
            while len(self._specs) > SPECS_KEPT:
                self._specs.popitem(last=False)
            return spec

    # --- user-facing -----------------------------------------------------------------

    def submit(self, spec_yaml: str) -> str:
        """Validate and store a job, then launch it in the background.

        Raises:
            SpecError: the spec is invalid or names data by path.
        """
        spec = parse_spec_text(spec_yaml)
        paths = [p.id for p in spec.parties if p.data.path is not None]
        if paths:
            raise SpecError(
                f"parties {paths} name their data by 'path'; a job submitted to running "
                "daemons names a dataset each party's config exposes: data: {dataset: NAME} "
                "(`vfl run` accepts paths because it starts the parties itself)"
            )
        spec_json = spec.to_json()
        job_id = self.store.create(spec.job, spec_yaml, spec_json)
        self._spec(job_id, spec_json, parsed=spec)
        self._spawn(job_id)
        return job_id

    def cancel(self, job_id: str) -> str:
        record = self.store.get(job_id)
        if not record.terminal:
            self.store.set_state(job_id, "CANCELLED", "cancelled by the user")
            self._abort_all(job_id, self._spec(job_id, record.spec_json), "cancelled by the user")
        return self.store.get(job_id).state

    def resume_pending(self) -> None:
        """After a restart: launch jobs that were submitted but not yet started."""
        for job_id in self.store.in_states("SUBMITTED"):
            self._spawn(job_id)

    def register(self, party_id: str, address: str, datasets: list[str]) -> None:
        """Record where party `party_id` listens (again after a restart).

        Raises:
            CoordinatorError: an invalid or reserved party id, or an address that is not
                host:port.
        """
        try:
            check_party_id(party_id)
        except CertError as exc:
            raise CoordinatorError(str(exc)) from None
        if party_id == COORDINATOR_ID:
            raise CoordinatorError(f"party id '{party_id}' is reserved for the coordinator")
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise CoordinatorError(
                f"party address {address!r} is not host:port (e.g. bank.example.org:7701)"
            )
        self.store.register_party(party_id, address, datasets)

    # --- party reports -----------------------------------------------------------------

    def report(self, job_id: str, party_id: str, event: str, state: str, payload: dict) -> bool:
        """Record a party's report; returns True if the party should stop the job.

        Raises:
            UnknownJob, SpecError, CoordinatorError: no such job, party, event or field type.
        """
        record = self.store.get(job_id)
        check_report(event, state, payload)
        if record.terminal:
            return True
        spec = self._spec(job_id, record.spec_json)
        spec.party(party_id)  # SpecError if the party is not in the job
        if event in ("round", "validation"):
            self.store.add_metric(job_id, party_id, event, payload)
        with self._lock:
            record = self.store.get(job_id)
            result = dict(record.result)
            if event == "state" and state and party_id == spec.active.id:
                self.store.set_state(job_id, state)
            elif event == "round":
                result.update(
                    round=payload.get("round"),
                    total_rounds=payload.get("total_rounds"),
                    loss=payload.get("loss"),
                )
                self.store.update_result(job_id, result)
            elif event == "aligned" and party_id == spec.active.id:
                for key in ("intersection_size", "psi_seconds"):
                    result[key] = payload.get(key)
                self.store.update_result(job_id, result)
            elif event == "validation":
                entry = {
                    "round": payload.get("round"),
                    "seconds": round(time.time() - result.get("started_at", time.time()), 3),
                    **payload.get("metrics", {}),
                }
                result.setdefault("history", []).append(entry)
                result["metrics"] = payload.get("metrics", {})
                self.store.update_result(job_id, result)
            elif event == "done":
                self._party_done(job_id, spec, party_id, result, payload)
            elif event == "failed":
                reason = str(payload.get("reason", f"party '{party_id}' failed"))
                self.store.set_state(job_id, "FAILED", reason)
                self._background(self._abort_all, job_id, spec, reason)
        return self.store.get(job_id).terminal

    def _party_done(
        self, job_id: str, spec: JobSpec, party_id: str, result: dict, payload: dict
    ) -> None:
        done = result.setdefault("parties", {})
        done[party_id] = {
            "bytes_sent": payload.get("bytes_sent", 0),
            "seconds": payload.get("seconds"),
            "local_updates": payload.get("local_updates", 0),
        }
        if party_id == spec.active.id:
            for key in ("rounds", "metrics", "history", "local_updates"):
                if key in payload:
                    result[key] = payload[key]
        result["bytes_sent"] = sum(int(p.get("bytes_sent") or 0) for p in done.values())
        if set(done) == {p.id for p in spec.parties}:
            result["seconds"] = round(time.time() - result.get("started_at", time.time()), 3)
            self.store.set_state(job_id, "SUCCEEDED", result=result)
        else:
            self.store.update_result(job_id, result)

    # --- party health ----------------------------------------------------------------

    def check_parties(self, grace_s: float) -> None:
        """Fail running jobs whose parties stopped answering or lost the job."""
        known = self.store.parties()
        for job_id in self.store.in_states(*RUNNING):
            record = self.store.get(job_id)
            spec = self._spec(job_id, record.spec_json)
            finished = set(record.result.get("parties", {}))
            for p in spec.parties:
                if p.id in finished or p.id not in known:
                    continue
                problem = self._probe(p.id, known[p.id], job_id, self._holds_job(job_id))
                key = (job_id, p.id)
                if problem is None:
                    self._silent_since.pop(key, None)
                    continue
                first = self._silent_since.setdefault(key, time.monotonic())
                if time.monotonic() - first >= grace_s:
                    self._silent_since.pop(key, None)
                    if self.store.set_state(job_id, "FAILED", problem):
                        self._abort_all(job_id, spec, problem)
                    break

    def _holds_job(self, job_id: str) -> bool:
        """Whether the parties of `job_id` should know it by now (were sent PrepareJob)."""
        with self._lock:
            return job_id not in self._unprepared

    def _probe(self, party_id: str, address: str, job_id: str, holds_job: bool) -> str | None:
        try:
            info = self._parties.stub(address, party_id).GetPartyInfo(
                party_pb2.GetPartyInfoRequest(), timeout=5
            )
        except grpc.RpcError as exc:
            return (
                f"party '{party_id}' at {address} stopped answering during the job "
                f"({explain(exc, address, self._parties.tls is not None, party_id)}); "
                "restart its daemon and submit the job again"
            )
        if holds_job and job_id not in info.running_jobs:
            return (
                f"party '{party_id}' lost job {job_id} (was its daemon restarted?); "
                "submit the job again"
            )
        return None

    # --- launching ---------------------------------------------------------------------

    def _spawn(self, job_id: str) -> None:
        self._background(self._launch, job_id)

    def _background(self, target, *args) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    def join(self, timeout: float) -> None:
        """Wait for launch and abort threads (a daemon stops only after them)."""
        deadline = time.monotonic() + timeout
        for thread in list(self._threads):
            thread.join(max(0.0, deadline - time.monotonic()))

    def _launch(self, job_id: str) -> None:
        record = self.store.get(job_id)
        spec = self._spec(job_id, record.spec_json)
        with self._lock:
            self._unprepared.add(job_id)
        try:
            addresses = self._addresses(spec)
            self.store.set_state(
                job_id, "ALIGNING", result={"job": job_id, "started_at": time.time()}
            )
            peers = [party_pb2.PeerAddress(party_id=k, address=v) for k, v in addresses.items()]
            self._prepare_all(job_id, record.spec_json, spec, addresses, peers)
            ended = self.store.get(job_id)
            if ended.terminal:  # cancelled while the parties loaded: drop what they prepared
                self._abort_all(job_id, spec, ended.reason)
                return
            for p in spec.parties:
                self._call(
                    p.id, addresses[p.id], "StartJob", party_pb2.StartJobRequest(job_id=job_id)
                )
            log.info("job %s started on %d parties", job_id, len(spec.parties))
        except PartyUnavailable as exc:
            self.store.set_state(job_id, "FAILED", str(exc))
            self._abort_all(job_id, spec, str(exc))
        finally:
            with self._lock:
                self._unprepared.discard(job_id)

    def _prepare_all(
        self,
        job_id: str,
        spec_json: str,
        spec: JobSpec,
        addresses: dict[str, str],
        peers: list[party_pb2.PeerAddress],
    ) -> None:
        """PrepareJob on every party at once: launching waits for the slowest load, not
        their sum.

        Raises:
            PartyUnavailable: the first party (in spec order) that could not prepare,
                once every party has answered.
        """
        request = party_pb2.PrepareJobRequest(job_id=job_id, spec_json=spec_json, peers=peers)
        deadline = max(self._control_timeout_s, spec.train.timeout_s)
        with self._lock:
            self._unprepared.discard(job_id)
        with ThreadPoolExecutor(len(spec.parties), thread_name_prefix="prepare") as pool:
            futures = [
                pool.submit(self._call, p.id, addresses[p.id], "PrepareJob", request, deadline)
                for p in spec.parties
            ]
        for future in futures:
            future.result()

    def _addresses(self, spec: JobSpec) -> dict[str, str]:
        known = self.store.parties()
        missing = [p.id for p in spec.parties if p.id not in known]
        if missing:
            raise PartyUnavailable(
                f"part{'ies' if len(missing) > 1 else 'y'} {missing} never registered with "
                "this coordinator; start each with `vfl party serve --config party.yaml` "
                "pointing its 'coordinator' at this coordinator"
            )
        return {p.id: known[p.id] for p in spec.parties}

    def _call(
        self, party_id: str, address: str, method: str, request, timeout: float | None = None
    ) -> object:
        stub = self._parties.stub(address, party_id)
        try:
            return getattr(stub, method)(request, timeout=timeout or self._control_timeout_s)
        except grpc.RpcError as exc:
            if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                why = explain(exc, address, self._parties.tls is not None, party_id)
                raise PartyUnavailable(
                    f"party '{party_id}' at {address} is not reachable ({exc.code().name}: "
                    f"{why}); check that its daemon is running and the address is right"
                ) from None
            raise PartyUnavailable(f"party '{party_id}': {exc.details()}") from None

    def _abort_all(self, job_id: str, spec: JobSpec, reason: str) -> None:
        known = self.store.parties()
        for p in spec.parties:
            if p.id in known:
                try:
                    self._parties.stub(known[p.id], p.id).AbortJob(
                        party_pb2.AbortJobRequest(job_id=job_id, reason=reason), timeout=5
                    )
                except grpc.RpcError:
                    pass  # an unreachable party has nothing left to stop
