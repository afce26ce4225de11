"""The jobs a party daemon holds, from loading their data to their end (`JobRegistry`).

A job is loading while its PrepareJob call loads this party's data, then prepared (a
`RunningJob`: the job, its mailbox and channel), then running once StartJob started its
thread. The registry remembers how the last `ENDED_MEMORY` jobs ended, so that late or
replayed envelopes get a clear error, and opens the gate of the kept obfuscator pools'
refills while no job runs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from vfl.party.errors import JobError, ShuttingDown
from vfl.party.guard import JobBudget
from vfl.party.inference.batch import PredictJob
from vfl.party.job import PartyJob
from vfl.secure.channel import Channel, Mailbox
from vfl.secure.errors import ChannelError

log = logging.getLogger(__name__)

ENDED_MEMORY = 1000  # ended jobs remembered, so late or replayed envelopes get a clear error


@dataclass
class RunningJob:
    """A job this party holds: its part of the job, mailbox and channel, and its thread
    once started."""

    job: PartyJob | PredictJob
    mailbox: Mailbox
    channel: Channel
    budget: JobBudget  # its account with the party's limits guard
    thread: threading.Thread | None = None
    state: str = "PREPARED"
    prepared_at: float = field(default_factory=time.monotonic)

    def release(self) -> None:
        """Close the ended job's mailbox, then its channel: a failed job's envelopes still
        in flight on an emulated WAN are dropped (a channel sends nothing once its job's
        mailbox is closed)."""
        self.mailbox.close("job finished")
        try:
            self.channel.close()
        except ChannelError as exc:
            log.debug("party %s: envelopes not delivered: %s", self.job.party_id, exc)


class JobRegistry:
    """The jobs of one party; thread-safe.

    Args:
        idle: called with True when the last running job ends, False when one starts.
    """

    def __init__(self, party_id: str, idle: Callable[[bool], None]) -> None:
        self.party_id, self._idle = party_id, idle
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._jobs: dict[str, RunningJob] = {}
        self._preparing: set[str] = set()  # jobs whose PrepareJob call is loading data
        self._aborted_loading: set[str] = set()  # of those, jobs aborted meanwhile
        self._stopping = False  # the daemon stops: what it aborts, it aborts for that
        self._ended: dict[str, tuple[str, frozenset[str]]] = {}  # job id -> how it ended, its
        # peers (insertion-ordered)
        self._busy = 0  # jobs running

    @contextmanager
    def loading(self, job_id: str) -> Iterator[None]:
        """While this party loads a job's data: the job is held (a slow load must not look
        like a lost job to the coordinator).

        Raises:
            JobError: the job was aborted meanwhile.
            ShuttingDown: ... because the daemon stops (the job pauses, not fails).
        """
        with self._lock:
            self._preparing.add(job_id)
        try:
            yield
        finally:
            with self._lock:
                self._preparing.discard(job_id)
                aborted = job_id in self._aborted_loading
                self._aborted_loading.discard(job_id)
        if aborted:
            me = self.party_id
            if self._stopping:
                raise ShuttingDown(f"party '{me}' stopped while it loaded the data of job {job_id}")
            raise JobError(f"job {job_id} was aborted while party '{me}' loaded its data")

    def stopping(self) -> None:
        """The daemon stops: jobs aborted from now on end because it does."""
        with self._lock:
            self._stopping = True

    def add(self, job_id: str, running: RunningJob) -> None:
        """Hold a prepared job (in place of one prepared before and not started).

        Raises:
            JobError: the job is running here already.
        """
        with self._lock:
            old = self._jobs.get(job_id)
            if old is not None and old.thread is not None:
                raise JobError(f"job {job_id} is already running on party '{self.party_id}'")
            self._ended.pop(job_id, None)
            self._jobs[job_id] = running

    def start(self, job_id: str, run: Callable[[str, RunningJob], None]) -> None:
        """Start a prepared job's thread, which runs `run(job_id, running)`; a job started
        already is left as it is.

        Raises:
            JobError: this party holds no such job.
        """
        with self._lock:
            if job_id not in self._jobs:
                raise JobError(f"job {job_id} is not known to party '{self.party_id}'")
            running = self._jobs[job_id]
            if running.thread is not None:
                return  # idempotent
            running.thread = threading.Thread(
                target=run, args=(job_id, running), name=f"job-{job_id}", daemon=True
            )
            running.state = "RUNNING"
            self._busy += 1
            if self._busy == 1:
                self._idle(False)
            running.thread.start()
            self._threads.append(running.thread)

    def finished(self, job_id: str, running: RunningJob) -> None:
        """A job's thread ends: the job is no longer held (unless it was prepared anew)."""
        with self._lock:
            if self._jobs.get(job_id) is running:
                del self._jobs[job_id]
                self._ended_as(job_id, running, "finished")
            self._busy -= 1
            if not self._busy:
                self._idle(True)

    def abort(self, job_id: str, how: str) -> RunningJob | None:
        """Drop a job, which ended `how` (one still loading stops once loaded); returns it,
        None if it was not held."""
        with self._lock:
            if job_id in self._preparing:
                self._aborted_loading.add(job_id)
            running = self._jobs.pop(job_id, None)
            if running is not None:
                self._ended_as(job_id, running, how)
        return running

    def expire(self, job_id: str, prepared_at: float) -> RunningJob | None:
        """Drop the job prepared at `prepared_at` if no StartJob followed; returns it, None
        if it started, was prepared anew, or ended."""
        with self._lock:
            running = self._jobs.get(job_id)
            if running is None or running.prepared_at != prepared_at or running.thread is not None:
                return None
            del self._jobs[job_id]
            self._ended_as(job_id, running, "expired: never started")
        return running

    def mailbox(self, job_id: str, sender: str, tag: str) -> Mailbox | None:
        """The mailbox of job `job_id` for envelope `tag` from `sender`; None if this party
        holds no such job with `sender` as a peer in it (a sender learns nothing of the
        jobs it is not in).

        Raises:
            JobError: the job, with `sender` in it, ended here.
        """
        with self._lock:
            ended = self._ended.get(job_id)
            running = self._jobs.get(job_id)
        if ended is not None:
            how, parties = ended
            if sender not in parties:
                return None
            raise JobError(
                f"job {job_id} already ended on party '{self.party_id}' ({how}); envelope "
                f"'{tag}' from '{sender}' came late or was replayed and is dropped"
            )
        if running is None or sender not in self._peers(running):
            return None
        return running.mailbox

    def held(self) -> set[str]:
        """Jobs loading, prepared or started."""
        with self._lock:
            return set(self._jobs) | self._preparing

    def started(self) -> set[str]:
        """Jobs whose thread runs."""
        with self._lock:
            return {j for j, r in self._jobs.items() if r.thread is not None}

    def by_state(self) -> dict[str, int]:
        """How many jobs are loading data, prepared, running."""
        with self._lock:
            running = sum(1 for r in self._jobs.values() if r.thread is not None)
            return {
                "loading": len(self._preparing),
                "prepared": len(self._jobs) - running,
                "running": running,
            }

    def join(self, timeout: float) -> None:
        """Wait up to `timeout` seconds for the jobs' threads to finish."""
        deadline = time.monotonic() + timeout
        with self._lock:
            threads = [t for t in self._threads if t.is_alive()]
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _peers(self, running: RunningJob) -> frozenset[str]:
        """The parties of a job that may send this party envelopes."""
        return frozenset(p.id for p in running.job.spec.parties) - {self.party_id}

    def _ended_as(self, job_id: str, running: RunningJob, how: str) -> None:
        """Remember how a job ended and its peers (call with the lock held); forget the
        oldest."""
        self._ended[job_id] = (how, self._peers(running))
        while len(self._ended) > ENDED_MEMORY:
            del self._ended[next(iter(self._ended))]
