"""The job life cycle: submit, launch on the parties, fold in their reports, end states.

SUBMITTED -> ALIGNING -> KEYING (blindfl) -> TRAINING -> SUCCEEDED, or FAILED / CANCELLED
with a reason (`vfl.contract.states`). The coordinator talks to parties over the control
plane only (`coordinator.party_control`); it never sees a payload. Reports are folded in
by `coordinator.reports`, silent parties found by `coordinator.health`.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import grpc
from vfl.contract.errors import SpecError
from vfl.contract.logs import job_context
from vfl.contract.spec import JobSpec, parse_spec_text
from vfl.contract.spec.predict import PredictSpec
from vfl.contract.states import (
    ALIGNING,
    CANCELLED,
    FAILED,
    PAUSED,
    RUNNING,
    SUBMITTED,
    SUCCEEDED,
    JobState,
    state_name,
)
from vfl.coordinator.errors import CoordinatorError, PartyUnavailable, UnknownModel
from vfl.coordinator.health import PartyHealth
from vfl.coordinator.metrics import CoordinatorMetrics
from vfl.coordinator.models import Models, deleted_on
from vfl.coordinator.party_control import CONTROL_TIMEOUT_S, PartyControl
from vfl.coordinator.reports import apply_report, check_report
from vfl.coordinator.store import JobStore
from vfl.proto import coordinator_pb2 as pb
from vfl.proto.rpc import COORDINATOR_ID, PeerClients
from vfl.secure.pki.certs import CertError, check_party_id

log = logging.getLogger(__name__)

__all__ = ["CONTROL_TIMEOUT_S", "Lifecycle"]

SPECS_KEPT = 256  # parsed specs of the most recently used jobs


class Lifecycle:
    """Args:
    store: the job database.
    parties: gRPC clients of the party daemons.
    control_timeout_s: deadline of a control call (see `PartyControl`).
    """

    def __init__(
        self, store: JobStore, parties: PeerClients, control_timeout_s: float = CONTROL_TIMEOUT_S
    ) -> None:
        self.store = store
        self.metrics = CoordinatorMetrics(store.count_by_state, lambda: len(store.parties()))
        self.control = PartyControl(store, parties, control_timeout_s)
        self.health = PartyHealth(store, self.control, self.spec, self._holds_job, self.pause)
        self.models = Models(store, self.control, self.spec)
        self._lock = threading.Lock()
        self._results = threading.Lock()  # serialises changes of a job's result
        self._specs: OrderedDict[str, JobSpec] = OrderedDict()  # parsed once per job
        # jobs being launched whose parties have not all answered PrepareJob yet: a party
        # may not hold such a job yet, so the monitor only checks that its parties answer
        self._unprepared: set[str] = set()
        self._threads: list[threading.Thread] = []

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
        job_id = self.store.create(spec.job, spec_yaml, spec.to_json())
        self._keep_spec(job_id, spec)
        log.info("job %s submitted (%s, %d parties)", job_id, spec.protocol, len(spec.parties))
        self._spawn(job_id)
        return job_id

    def submit_prediction(self, request: PredictSpec, spec_yaml: str) -> str:
        """Store and launch a job that scores `request.data` with model `request.model`.

        Raises:
            UnknownJob: no job trained such a model.
            CoordinatorError: the job did not succeed, or is itself a prediction.
            UnknownModel: the model was deleted.
            SpecError: the datasets do not name exactly the model's parties.
        """
        spec = self._trained(request.model).for_prediction(request)
        job_id = self.store.create(spec.job, spec_yaml, spec.to_json())
        self._keep_spec(job_id, spec)
        log.info("job %s submitted (prediction with model %s)", job_id, request.model)
        self._spawn(job_id)
        return job_id

    def locate_model(self, model_id: str) -> tuple[str, str]:
        """The active party of model `model_id` and the address it registered (where
        `vfl score` asks for scores).

        Raises:
            UnknownJob: no job trained such a model.
            CoordinatorError: the job did not succeed, or is itself a prediction.
            PartyUnavailable: the active party never registered here.
        """
        active = self._trained(model_id).active.id
        address = self.store.parties().get(active)
        if address is None:
            raise PartyUnavailable(
                f"party '{active}', the active party of model {model_id}, has not registered "
                "with this coordinator; start its daemon, or pass its address with --party"
            )
        return active, address

    def _trained(self, model_id: str) -> JobSpec:
        """The spec of the training job that left model `model_id`.

        Raises:
            UnknownJob: no such job. CoordinatorError: it left no model.
            UnknownModel: the model was deleted.
        """
        record = self.store.get(model_id)
        trained = self.spec(model_id)
        if trained.predict is not None or record.state != SUCCEEDED:
            what = "a prediction" if trained.predict is not None else state_name(record.state)
            raise CoordinatorError(
                f"job {model_id} is {what}, so it left no model; score with a training "
                "job that SUCCEEDED (see `vfl models`)"
            )
        deletion = self.store.model_deletion(model_id)
        if deletion is not None:
            raise UnknownModel(
                f"model {model_id} was deleted on {deleted_on(deletion)}; train it again "
                "(`vfl submit` its training spec) and score with the new model"
            )
        return trained

    def cancel(self, job_id: str) -> JobState:
        record = self.store.get(job_id)
        state = state_name(record.state)
        if record.terminal:
            log.info("job %s: cancel requested, but it had already ended %s", job_id, state)
        else:
            log.info("job %s: cancel requested by the user (it was %s)", job_id, state)
            self.end(job_id, CANCELLED, "cancelled by the user")
        return self.store.get(job_id).state

    def resume_pending(self) -> None:
        """After a restart: launch jobs that were submitted but not yet started, and look
        after the jobs that were running (`recover`) in the background."""
        for job_id in self.store.in_states(SUBMITTED):
            self._spawn(job_id)
        running = self.store.in_states(*RUNNING)
        if running:
            self._background(self._recover, running)

    def _recover(self, job_ids: list[str]) -> None:
        """Re-attach to jobs every party still trains; pause the others (a launch this
        coordinator did not finish, or parties that lost the job), dropping what the
        parties prepared. Jobs whose parties do not answer are left to the health monitor."""
        for job_id in job_ids:
            with job_context(job_id):
                try:
                    spec = self.spec(job_id)
                    addresses = self.control.addresses(spec)
                    infos = {p.id: self.control.info(p.id, addresses[p.id]) for p in spec.parties}
                except (PartyUnavailable, grpc.RpcError):
                    continue
                finished = set(self.store.get(job_id).result.parties)
                idle = [
                    pid
                    for pid, info in infos.items()
                    if pid not in finished and job_id not in info.started_jobs
                ]
                if not idle:
                    log.info("re-attached: every party still runs the job")
                    continue
                self.pause(
                    job_id,
                    spec,
                    f"the coordinator restarted and part{'ies' if len(idle) > 1 else 'y'} "
                    f"{idle} no longer run{'' if len(idle) > 1 else 's'} the job",
                )

    def resume(self, job_id: str) -> tuple[JobState, int]:
        """Launch a paused job again after the newest round every party has checkpointed
        (from the start if no party has any); returns its state and that round.

        Raises:
            UnknownJob: no such job.
            CoordinatorError: the job is not paused, or a party holds no usable checkpoint
                of the round the others hold (the message names each party and its rounds).
            PartyUnavailable: a party is not registered or does not answer.
        """
        with job_context(job_id):
            record = self.store.get(job_id)
            if record.state != PAUSED:
                raise CoordinatorError(
                    f"job {job_id} is {state_name(record.state)}; only a paused job can be resumed"
                )
            spec = self.spec(job_id)
            addresses = self.control.addresses(spec)
            self.control.check_answering(spec, addresses)
            held = self.control.checkpoints(job_id, record.spec_json, spec, addresses)
            rnd = resume_round(job_id, held)
            why = f"resumed after round {rnd}" if rnd else "resumed from the start"
            with self._results:
                result = pb.JobResult()
                result.CopyFrom(self.store.get(job_id).result)
                result.resumed_from = rnd
                result.started_at = time.time()
                result.ClearField("parties")  # every party runs (and reports its end) again
                if not self.store.set_state(job_id, ALIGNING, why, result, expect=PAUSED):
                    raise CoordinatorError(f"job {job_id} changed state meanwhile; try again")
            log.info("resuming after round %d", rnd)
            self._background(self._launch, job_id, rnd)
            return ALIGNING, rnd

    def pause(self, job_id: str, spec: JobSpec, reason: str) -> None:
        """A party was lost: pause the job (its parties keep their checkpoints)."""
        with job_context(job_id):
            round_ = self.store.get(job_id).result.checkpoint_round
            why = (
                f"{reason}; every party has checkpointed round {round_}: once the party is "
                f"back, continue with `vfl resume {job_id}`"
            )
            if self.store.set_state(job_id, PAUSED, why):
                log.info("job %s PAUSED: %s", job_id, why)
                self.control.abort_all(job_id, spec, f"paused: {reason}")

    def auto_resume(self) -> None:
        """Resume paused jobs whose parties all answer again (`serve --auto-resume`)."""
        for job_id in self.store.in_states(PAUSED):
            try:
                spec = self.spec(job_id)
                addresses = self.control.addresses(spec)
                for p in spec.parties:
                    self.control.running_jobs(p.id, addresses[p.id])  # answers at all?
            except (PartyUnavailable, grpc.RpcError):
                continue
            try:
                self.resume(job_id)
            except (CoordinatorError, SpecError) as exc:
                log.warning("job %s: automatic resume failed: %s", job_id, exc)

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
        self.health.contacts.heard(party_id)
        log.info("party %s registered at %s", party_id, address)
        if self.models.pending_at(party_id):  # deleted models it did not drop while away
            self._background(self.models.retry, party_id)

    def spec(self, job_id: str) -> JobSpec:
        """A job's spec, parsed once: at submit, or at first use after a restart; not on
        every report and health tick. The most recently used `SPECS_KEPT` stay.

        Raises:
            UnknownJob: no such job.
        """
        with self._lock:
            spec = self._specs.get(job_id)
        return self._keep_spec(job_id, spec or JobSpec.from_json(self.store.get(job_id).spec_json))

    def _keep_spec(self, job_id: str, spec: JobSpec) -> JobSpec:
        with self._lock:
            self._specs[job_id] = spec
            self._specs.move_to_end(job_id)
            while len(self._specs) > SPECS_KEPT:
                self._specs.popitem(last=False)
        return spec

    # --- party reports -----------------------------------------------------------------

    def report(self, party_id: str, request: pb.ReportProgressRequest) -> bool:
        """Record a party's report; returns True if the party should stop the job.

        Raises:
            UnknownJob, SpecError, CoordinatorError: no such job, a party not in the job,
                or a malformed report.
        """
        job_id = request.job_id
        self.health.contacts.heard(party_id)  # checked by the servicer: it is that party
        with job_context(job_id):
            return self._report(job_id, party_id, request)

    def _report(self, job_id: str, party_id: str, request: pb.ReportProgressRequest) -> bool:
        record = self.store.get(job_id)
        event = check_report(request)
        if record.terminal or (record.state == PAUSED and event not in ("done", "checkpoint")):
            return True  # a paused job's parties stop; an end reached meanwhile still counts
        spec = self.spec(job_id)
        spec.party(party_id)  # SpecError if the party is not in the job
        self.metrics.report(job_id, party_id, request)
        if event in ("round", "validation"):
            self.store.add_metric(job_id, party_id, event, getattr(request, event))
        with self._results:  # read, fold in and write back at once: no report overwrites another
            current = self.store.get(job_id).result
            outcome = apply_report(current, spec, party_id, request)
            moved = False
            if outcome.state is None:
                if outcome.result != current:  # a passive party's round changes nothing
                    self.store.update_result(job_id, outcome.result)
            elif outcome.state != FAILED:
                moved = self.store.set_state(job_id, outcome.state, result=outcome.result)
        if outcome.state == FAILED:
            self.end(job_id, FAILED, outcome.reason, background=True)
        elif moved and outcome.state == SUCCEEDED:
            rounds = outcome.result.rounds
            log.info("job %s SUCCEEDED: every party reported done (%d rounds)", job_id, rounds)
        elif moved:
            log.info("job %s %s (reported by %s)", job_id, state_name(outcome.state), party_id)
        return self.store.get(job_id).terminal

    # --- ending ------------------------------------------------------------------------

    def end(self, job_id: str, state: JobState, reason: str, background: bool = False) -> None:
        """Move a job to an end state (unless it already ended) and abort it everywhere."""
        with job_context(job_id):
            self._end(job_id, state, reason, background)

    def _end(self, job_id: str, state: JobState, reason: str, background: bool) -> None:
        if not self.store.set_state(job_id, state, reason):
            return
        log.info("job %s %s: %s", job_id, state_name(state), reason)
        spec = self.spec(job_id)
        if background:
            self._background(self.control.abort_all, job_id, spec, reason)
        else:
            self.control.abort_all(job_id, spec, reason)

    # --- party health ----------------------------------------------------------------

    def check_parties(self, grace_s: float) -> None:
        """Fail running jobs whose parties stopped answering or lost the job."""
        self.health.check(grace_s)

    def _holds_job(self, job_id: str) -> bool:
        """Whether the parties of `job_id` must hold it by now (all answered PrepareJob)."""
        with self._lock:
            return job_id not in self._unprepared

    # --- launching ---------------------------------------------------------------------

    def _spawn(self, job_id: str) -> None:
        self._background(self._launch, job_id)

    def _background(self, target: Callable[..., Any], *args: Any) -> None:
        context = contextvars.copy_context()  # a job's abort thread names the job
        thread = threading.Thread(target=context.run, args=(target, *args), daemon=True)
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    def join(self, timeout: float) -> None:
        """Wait for launch and abort threads (a daemon stops only after them)."""
        deadline = time.monotonic() + timeout
        for thread in list(self._threads):
            thread.join(max(0.0, deadline - time.monotonic()))

    def _launch(self, job_id: str, resume_round: int = 0) -> None:
        with job_context(job_id):
            self._launch_job(job_id, resume_round)

    def _launch_job(self, job_id: str, resume_round: int) -> None:
        record = self.store.get(job_id)
        spec = self.spec(job_id)
        with self._lock:
            self._unprepared.add(job_id)
        try:
            addresses = self.control.addresses(spec)
            if not resume_round:
                started = pb.JobResult(job=job_id, started_at=time.time())
                self.store.set_state(job_id, ALIGNING, result=started)
            self.control.prepare_all(job_id, record.spec_json, spec, addresses, resume_round)
            with self._lock:  # from now on every party holds the job (prepared)
                self._unprepared.discard(job_id)
            ended = self.store.get(job_id)
            if ended.terminal:  # cancelled while the parties loaded: drop what they prepared
                self.control.abort_all(job_id, spec, ended.reason)
                return
            self.control.start_all(job_id, spec, addresses)
            log.info("started on %d parties", len(spec.parties))
        except PartyUnavailable as exc:
            self.end(job_id, FAILED, str(exc))
        except Exception:
            log.exception("launch failed unexpectedly")
            self.end(job_id, FAILED, "the coordinator failed to launch the job (see its log)")
        finally:
            with self._lock:
                self._unprepared.discard(job_id)


def resume_round(job_id: str, held: dict[str, dict[int, str]]) -> int:
    """The newest round every party holds a usable checkpoint of; 0 if no party holds one.

    Raises:
        CoordinatorError: some party holds usable checkpoints but they share no round with
            another party's (names each party with the rounds it holds and why not).
    """
    usable = {
        pid: {r for r, problem in rounds.items() if not problem} for pid, rounds in held.items()
    }
    common = set.intersection(*usable.values()) if usable else set()
    if common:
        return max(common)
    if not any(usable.values()):
        return 0
    lines = []
    for pid, rounds in held.items():
        shown = ", ".join(
            f"{r}" + (f" (unusable: {problem})" if problem else "")
            for r, problem in sorted(rounds.items())
        )
        lines.append(f"party '{pid}' holds {('rounds ' + shown) if rounds else 'no checkpoint'}")
    raise CoordinatorError(
        f"job {job_id} cannot be resumed: no round is checkpointed at every party; "
        + "; ".join(lines)
        + ". Restore the missing checkpoints, or submit the job again"
    )
