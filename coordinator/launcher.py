"""Launching jobs on their parties: a new job, a paused one resumed from its newest common
checkpoint, and after a restart the jobs the coordinator had submitted or was running.

A launch runs in the background (`coordinator.background`): admission (a job whose
parties have no room waits QUEUED, `coordinator.admission`), PrepareJob at every party,
then StartJob. Until every party has answered PrepareJob, a party may not hold the job
yet, so the health monitor only checks that its parties answer (`Launcher.holds_job`).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Protocol

import grpc
from vfl.contract.errors import SpecError
from vfl.contract.logs import job_context
from vfl.contract.spec import JobSpec
from vfl.contract.states import (
    ALIGNING,
    FAILED,
    PAUSED,
    QUEUED,
    RUNNING,
    SUBMITTED,
    JobState,
    state_name,
)
from vfl.coordinator.admission import REGISTER_WAIT_S, Admission
from vfl.coordinator.background import Background
from vfl.coordinator.errors import (
    CoordinatorError,
    PartyBusy,
    PartyRefused,
    PartyUnavailable,
    PartyUnregistered,
)
from vfl.coordinator.party_control import PartyControl
from vfl.coordinator.specs import SpecCache
from vfl.coordinator.store import JobStore
from vfl.proto import coordinator_pb2 as pb, party_pb2

log = logging.getLogger(__name__)

RESUME_WAIT_S = 10.0  # how long a resume waits for the job's previous launch to return


class Ending(Protocol):
    """How a launch ends a job it cannot run (`Lifecycle`)."""

    def end(self, job_id: str, state: JobState, reason: str, background: bool = False) -> None:
        """Move a job to an end state and abort it everywhere."""

    def pause(self, job_id: str, spec: JobSpec, reason: str) -> None:
        """Pause a job (its parties keep their checkpoints)."""


class Launcher:
    """Args:
    store: the job database.
    control: the control plane to the parties.
    specs: the jobs' parsed specs.
    threads: where launches run.
    results: held while a job's result changes (shared with the report folding).
    ending: ends or pauses a job a launch cannot run.
    register_wait_s: how long a submitted job waits for its parties to register.
    """

    def __init__(
        self,
        store: JobStore,
        control: PartyControl,
        specs: SpecCache,
        threads: Background,
        results: threading.Lock,
        ending: Ending,
        register_wait_s: float = REGISTER_WAIT_S,
    ) -> None:
        self._store = store
        self._control = control
        self._specs = specs
        self._threads = threads
        self._results = results
        self._ending = ending
        self._lock = threading.Lock()
        # jobs being launched whose parties have not all answered PrepareJob yet
        self._unprepared: set[str] = set()
        self._launching: set[str] = set()  # jobs whose launch has not returned
        self._launch_ended = threading.Condition(self._lock)
        self.admission = Admission(store, control, specs, register_wait_s)
        self._register_wait_s = register_wait_s

    def spawn(self, job_id: str) -> None:
        """Launch a stored job in the background, or queue it (QUEUED) if its parties have
        no room for it now."""
        self._threads.run(self._admit, job_id)

    def admit_queued(self) -> None:
        """Launch the QUEUED jobs whose parties have room now, oldest first."""
        for job_id in self.admission.claim_queued():
            rnd = self._store.get(job_id).result.resumed_from
            why = "launched: its parties have room"
            if self._store.set_state(job_id, ALIGNING, why, expect=QUEUED):
                self._threads.run(self._launch, job_id, rnd, rnd > 0)
            else:  # cancelled meanwhile
                self.admission.released(job_id)

    def _admit(self, job_id: str) -> None:
        with job_context(job_id):
            if self.admission.claim(job_id, SUBMITTED):
                self._launch_job(job_id, 0, resuming=False)

    def holds_job(self, job_id: str) -> bool:
        """Whether the parties of `job_id` must hold it by now (all answered PrepareJob)."""
        with self._lock:
            return job_id not in self._unprepared

    def resume_pending(self) -> None:
        """After a restart: launch jobs that were submitted but not yet started, and look
        after the jobs that were running (`_recover`) in the background."""
        for job_id in self._store.in_states(SUBMITTED):
            self.spawn(job_id)
        self._threads.run(self.admit_queued)  # the queue, kept in the job store
        running = self._store.in_states(*RUNNING)
        if running:
            self._threads.run(self._recover, running)

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
            self._wait_launch_ended(job_id)
            record = self._store.get(job_id)
            if record.state != PAUSED:
                raise CoordinatorError(
                    f"job {job_id} is {state_name(record.state)}; only a paused job can be resumed"
                )
            spec = self._specs.spec(job_id)
            addresses = self._control.addresses(spec)
            self._control.check_answering(spec, addresses)
            held = self._control.checkpoints(job_id, record.spec_json, spec, addresses)
            rnd = resume_round(job_id, held)
            self._restart(job_id, rnd)
            log.info("resuming after round %d", rnd)
            self._threads.run(self._launch, job_id, rnd, True)
            return ALIGNING, rnd

    def _wait_launch_ended(self, job_id: str) -> None:
        """Wait for a launch of `job_id` still in flight (paused while a party loads its
        data, it drops what the parties prepared once they answer) to return.

        Raises:
            CoordinatorError: it has not returned within `RESUME_WAIT_S`.
        """
        with self._lock:
            ended = self._launch_ended.wait_for(
                lambda: job_id not in self._launching, RESUME_WAIT_S
            )
        if not ended:
            raise CoordinatorError(
                f"job {job_id} was paused while its parties loaded their data, and a party "
                "is loading still; try again once it has (a minute for a large table)"
            )

    def auto_resume(self) -> None:
        """Resume paused jobs whose parties all answer again (`serve --auto-resume`)."""
        for job_id in self._store.in_states(PAUSED):
            try:
                spec = self._specs.spec(job_id)
                addresses = self._control.addresses(spec)
                for p in spec.parties:
                    self._control.running_jobs(p.id, addresses[p.id])  # answers at all?
            except (PartyUnavailable, grpc.RpcError):
                continue
            try:
                self.resume(job_id)
            except (CoordinatorError, SpecError) as exc:
                log.warning("job %s: automatic resume failed: %s", job_id, exc)

    def _restart(self, job_id: str, rnd: int) -> None:
        """Move a paused job back to ALIGNING, to run again after round `rnd`.

        Raises:
            CoordinatorError: the job is no longer paused.
        """
        why = f"resumed after round {rnd}" if rnd else "resumed from the start"
        with self._results:
            result = pb.JobResult()
            result.CopyFrom(self._store.get(job_id).result)
            result.resumed_from = rnd
            result.started_at = time.time()
            result.ClearField("parties")  # every party runs (and reports its end) again
            if not self._store.set_state(job_id, ALIGNING, why, result, expect=PAUSED):
                raise CoordinatorError(f"job {job_id} changed state meanwhile; try again")

    def _recover(self, job_ids: list[str]) -> None:
        """Re-attach to jobs every party still trains; pause the others (a launch this
        coordinator did not finish, or parties that lost the job), dropping what the
        parties prepared. Jobs whose parties do not answer are left to the health monitor."""
        for job_id in job_ids:
            with job_context(job_id):
                try:
                    spec = self._specs.spec(job_id)
                    addresses = self._control.addresses(spec)
                    infos = {p.id: self._control.info(p.id, addresses[p.id]) for p in spec.parties}
                except (PartyUnavailable, grpc.RpcError):
                    continue
                finished = set(self._store.get(job_id).result.parties)
                idle = [
                    pid
                    for pid, info in infos.items()
                    if pid not in finished and job_id not in info.started_jobs
                ]
                if not idle:
                    log.info("re-attached: every party still runs the job")
                    continue
                launched = self._store.get(job_id).result.started_at
                restarted = [p for p in idle if _up_since(infos[p]) > launched > 0]
                also = "".join(
                    f"; party '{p}' restarted too (its daemon is up since "
                    f"{time.strftime('%H:%M:%S UTC', time.gmtime(_up_since(infos[p])))})"
                    for p in restarted
                )
                self._ending.pause(
                    job_id,
                    spec,
                    f"the coordinator restarted and part{'ies' if len(idle) > 1 else 'y'} "
                    f"{idle} no longer run{'' if len(idle) > 1 else 's'} the job{also}",
                )

    def _launch(self, job_id: str, resume_round: int = 0, resuming: bool = False) -> None:
        with job_context(job_id):
            self._launch_job(job_id, resume_round, resuming)

    def _launch_job(self, job_id: str, resume_round: int, resuming: bool) -> None:
        record = self._store.get(job_id)
        spec = self._specs.spec(job_id)
        with self._lock:
            self._unprepared.add(job_id)
            self._launching.add(job_id)
        try:
            addresses = self._control.addresses(spec)
            if not resume_round:
                started = pb.JobResult(job=job_id, started_at=time.time())
                self._store.set_state(job_id, ALIGNING, result=started)
            if resuming:  # a party the pause's abort did not reach still runs the old run
                self._control.abort_all(job_id, spec, "resumed: the paused run is dropped")
            self._control.prepare_all(job_id, record.spec_json, spec, addresses, resume_round)
            with self._lock:  # from now on every party holds the job (prepared)
                self._unprepared.discard(job_id)
            self.admission.released(job_id)
            ended = self._store.get(job_id)
            if ended.terminal or ended.state == PAUSED:  # cancelled or paused while the
                self._control.abort_all(job_id, spec, ended.reason)  # parties loaded: drop it
                return
            self._control.start_all(job_id, spec, addresses)
            log.info("started on %d parties", len(spec.parties))
        except PartyBusy as exc:  # a party has no room after all: wait for it
            self._control.abort_all(job_id, spec, "queued: a party has no room for it yet")
            self.admission.requeue(job_id, f"waiting for room: {exc}")
        except PartyUnavailable as exc:  # and PartyRefused
            self._unavailable(job_id, spec, exc, resuming)
        except Exception:
            log.exception("launch failed unexpectedly")
            self._ending.end(
                job_id, FAILED, "the coordinator failed to launch the job (see its log)"
            )
        finally:
            with self._lock:
                self._unprepared.discard(job_id)
                self._launching.discard(job_id)
                self._launch_ended.notify_all()
            self.admission.released(job_id)

    def _unavailable(
        self, job_id: str, spec: JobSpec, exc: PartyUnavailable, resuming: bool
    ) -> None:
        """A party did not answer, or refused, while the job launched: a job paused
        meanwhile (a party stopped answering, or dropped the job it was loading) stays
        paused; a refusal of the job's input fails it, marked so that the CLI exits 2; a
        resumed job pauses again (the parties keep their checkpoints); only a fresh job
        that no party ran fails."""
        reason = str(exc)
        if self._store.get(job_id).state == PAUSED:
            log.info("launch stopped: the job was paused meanwhile (%s)", reason)
        elif isinstance(exc, PartyRefused):
            with self._results:
                refused = self._store.get(job_id).result
                refused.refused = True
                self._store.update_result(job_id, refused)
            self._ending.end(job_id, FAILED, reason)
        elif resuming:
            self._ending.pause(job_id, spec, f"{reason} (while the job resumed)")
        elif isinstance(exc, PartyUnregistered) and self._register_wait_s > 0:
            waited = f"{self._register_wait_s:g} s after the job was submitted"
            self._ending.end(job_id, FAILED, f"{reason} (the job waited {waited})")
        else:
            self._ending.end(job_id, FAILED, reason)


def _up_since(info: party_pb2.GetPartyInfoResponse) -> float:
    """When a party's daemon started, by this clock (0: it did not say)."""
    return time.time() - (info.time - info.started_at) if info.started_at else 0.0


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
