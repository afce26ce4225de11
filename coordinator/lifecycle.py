"""The job life cycle: submit, launch on the parties, fold in their reports, end states.

SUBMITTED (-> QUEUED) -> ALIGNING -> KEYING (blindfl) -> TRAINING -> SUCCEEDED, or FAILED /
CANCELLED with a reason (`vfl.contract.states`). The coordinator talks to parties over the
control plane only (`coordinator.party_control`); it never sees a payload.

`Lifecycle` is what the servicer, the server and the dashboard use. It makes a job's state
transitions itself (reports, cancel, pause, end states) and composes the rest: submission
(`coordinator.submission`), launching and resuming (`coordinator.launcher`), the parsed
specs (`coordinator.specs`), reports folded in by `coordinator.reports`, silent parties
found by `coordinator.health`, and the models (`coordinator.models`).
"""

from __future__ import annotations

import logging
import threading

from vfl.contract.logs import job_context
from vfl.contract.spec import JobSpec, parse_spec_text
from vfl.contract.spec.predict import PredictSpec
from vfl.contract.states import (
    CANCELLED,
    FAILED,
    PAUSED,
    RUNNING,
    SUCCEEDED,
    JobState,
    state_name,
)
from vfl.coordinator.admission import REGISTER_WAIT_S
from vfl.coordinator.background import Background
from vfl.coordinator.errors import CoordinatorError
from vfl.coordinator.health import PartyHealth
from vfl.coordinator.launcher import Launcher
from vfl.coordinator.metrics import CoordinatorMetrics
from vfl.coordinator.models import Models
from vfl.coordinator.party_control import CONTROL_TIMEOUT_S, PartyControl
from vfl.coordinator.reports import apply_report, check_report, happened
from vfl.coordinator.specs import SpecCache
from vfl.coordinator.store import JobStore
from vfl.coordinator.submission import Submissions
from vfl.proto import coordinator_pb2 as pb
from vfl.rpc import COORDINATOR_ID, PeerClients
from vfl.secure.pki.certs import CertError, check_party_id

log = logging.getLogger(__name__)

__all__ = ["CONTROL_TIMEOUT_S", "Lifecycle"]


class Lifecycle:
    """Args:
    store: the job database.
    parties: gRPC clients of the party daemons.
    control_timeout_s: deadline of a control call (see `PartyControl`).
    register_wait_s: how long a submitted job waits QUEUED for parties that have not
        registered yet (`coordinator.admission`).
    """

    def __init__(
        self,
        store: JobStore,
        parties: PeerClients,
        control_timeout_s: float = CONTROL_TIMEOUT_S,
        register_wait_s: float = REGISTER_WAIT_S,
    ) -> None:
        self.store = store
        self.metrics = CoordinatorMetrics(store.count_by_state, lambda: len(store.parties()))
        self.control = PartyControl(store, parties, control_timeout_s)
        self._specs = SpecCache(store)
        self._threads = Background()
        self._results = threading.Lock()  # serialises changes of a job's result
        self.launcher = Launcher(
            store, self.control, self._specs, self._threads, self._results, self, register_wait_s
        )
        self.submissions = Submissions(store, self._specs, self.launcher.spawn)
        self.health = PartyHealth(
            store, self.control, self.spec, self.launcher.holds_job, self.pause
        )
        self.models = Models(store, self.control, self.spec)

    # --- user-facing (`Submissions`, `Launcher`) -----------------------------------------

    def submit(self, spec_yaml: str, spec: JobSpec | None = None) -> str:
        """Store and launch a job (`Submissions.submit`, which says what it raises); `spec`
        is `spec_yaml` parsed, when the caller parsed it already (the servicer: once per
        submission), else it is parsed here.

        Raises:
            SpecError: the spec is invalid.
        """
        return self.submissions.submit(spec or parse_spec_text(spec_yaml), spec_yaml)

    def submit_prediction(self, request: PredictSpec, spec_yaml: str) -> str:
        """Store and launch a prediction (`Submissions.submit_prediction`: its Raises)."""
        return self.submissions.submit_prediction(request, spec_yaml)

    def locate_parties(self, model_id: str) -> dict[str, str]:
        """Where the parties of `model_id` listen now (`Submissions.locate_parties`)."""
        return self.submissions.locate_parties(model_id)

    def locate_model(self, model_id: str) -> tuple[str, str]:
        """Where model `model_id` scores online (`Submissions.locate_model`: its Raises)."""
        return self.submissions.locate_model(model_id)

    def resume(self, job_id: str) -> tuple[JobState, int]:
        """Launch a paused job again (`Launcher.resume`, which says what it raises)."""
        return self.launcher.resume(job_id)

    def resume_pending(self) -> None:
        """After a restart: launch submitted jobs, look after running ones (`Launcher`)."""
        self.launcher.resume_pending()

    def admit_queued(self) -> None:
        """Launch the QUEUED jobs whose parties have room now (`coordinator.admission`)."""
        self.launcher.admit_queued()

    def auto_resume(self) -> None:
        """Resume paused jobs whose parties all answer again (`serve --auto-resume`)."""
        self.launcher.auto_resume()

    def cancel(self, job_id: str) -> JobState:
        """Cancel a job (unless it already ended); returns its state.

        Raises:
            UnknownJob: no such job.
        """
        record = self.store.get(job_id)
        state = state_name(record.state)
        if record.terminal:
            log.info("job %s: cancel requested, but it had already ended %s", job_id, state)
        else:
            log.info("job %s: cancel requested by the user (it was %s)", job_id, state)
            self.end(job_id, CANCELLED, "cancelled by the user")
        return self.store.get(job_id).state

    def spec(self, job_id: str) -> JobSpec:
        """A job's spec, parsed once (`SpecCache`).

        Raises:
            UnknownJob: no such job.
        """
        return self._specs.spec(job_id)

    # --- parties -----------------------------------------------------------------------

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
        self._threads.run(self.admit_queued)  # a job may have waited for it
        if self.models.pending_at(party_id):  # deleted models it did not drop while away
            self._threads.run(self.models.retry, party_id)

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
        if event == "stopping":
            return self._stopping(job_id, spec, party_id, request.stopping.reason)
        if event in ("round", "validation"):
            at = happened(record.result, request)  # not its arrival after an outage
            self.store.add_metric(job_id, party_id, event, getattr(request, event), at)
        with self._results:  # read, fold in and write back at once: no report overwrites another
            current = self.store.get(job_id).result
            outcome = apply_report(current, spec, party_id, request)
            moved = False
            if outcome.state is None:
                if outcome.result != current:  # a passive party's round changes nothing
                    self.store.update_result(job_id, outcome.result)
            elif outcome.state not in (FAILED, PAUSED):
                # an end replaces the reason of the last wait ("launched: ...")
                done = "every party finished" if outcome.state == SUCCEEDED else ""
                reason = outcome.reason or done
                moved = self.store.set_state(job_id, outcome.state, reason, outcome.result)
        if outcome.state == FAILED:
            self.end(job_id, FAILED, outcome.reason, background=True)
        elif outcome.state == PAUSED:  # a party's problem its operator can mend
            self.pause(job_id, spec, outcome.reason, background=True, when="once it is mended")
        elif moved and outcome.state == SUCCEEDED:
            rounds = outcome.result.rounds
            log.info("job %s SUCCEEDED: every party reported done (%d rounds)", job_id, rounds)
            self._threads.run(self.admit_queued)  # its slots are free
        elif moved and outcome.state is not None:
            log.info("job %s %s (reported by %s)", job_id, state_name(outcome.state), party_id)
        return self.store.get(job_id).terminal

    def _stopping(self, job_id: str, spec: JobSpec, party_id: str, reason: str) -> bool:
        """Party `party_id` stops its daemon as planned: a running job pauses at once, its
        reason saying so (not, seconds later, that the party stopped answering)."""
        if self.store.get(job_id).state in RUNNING:
            why = reason or "its daemon was stopped"
            self.pause(job_id, spec, f"party '{party_id}' stopped: {why}", background=True)
        return True

    def check_parties(self, grace_s: float) -> None:
        """Fail running jobs whose parties stopped answering or lost the job."""
        self.health.check(grace_s)

    # --- pausing and ending ------------------------------------------------------------

    def pause(
        self,
        job_id: str,
        spec: JobSpec,
        reason: str,
        background: bool = False,
        when: str = "once the party is back",
    ) -> None:
        """A party was lost, or hit a problem its operator can mend: pause the job (its
        parties keep their checkpoints); with `background`, the parties are told in a
        thread of their own. `when`: when the job can go on."""
        with job_context(job_id):
            round_ = self.store.get(job_id).result.checkpoint_round
            why = (
                f"{reason}; every party has checkpointed round {round_}: {when}, "
                f"continue with `vfl resume {job_id}`"
            )
            if self.store.set_state(job_id, PAUSED, why):
                log.info("job %s PAUSED: %s", job_id, why)
                if background:
                    self._threads.run(self.control.abort_all, job_id, spec, f"paused: {reason}")
                else:
                    self.control.abort_all(job_id, spec, f"paused: {reason}")
                self._threads.run(self.admit_queued)  # its slots are free

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
            self._threads.run(self.control.abort_all, job_id, spec, reason)
        else:
            self.control.abort_all(job_id, spec, reason)
        self._threads.run(self.admit_queued)  # its slots are free

    def join(self, timeout: float) -> None:
        """Wait for launch and abort threads (a daemon stops only after them)."""
        self._threads.join(timeout)
