"""The guard of a party's limits while its jobs run (`Guard`), and each job's account with
it (`JobBudget`).

Admission (`Guard.admit`, at PREPARE) checks a job's estimate (`party.limits`) and opens
its account; the account closes once the daemon no longer holds the job. A watchdog
thread samples the resident memory of the daemon's process tree (the daemon and its
worker processes) every `interval_s`. When it is over `limits.memory_gb`, the guard fails
the job that holds the most by its account (`JobBudget.held_bytes`: its estimate, or
more where its table reader has read more) with `MemoryLimitExceeded`. For `PENDING_S` after, while
that job stops (its thread may allocate on until its next check, and what it held is
freed once its error is dropped), the guard fails no other job and hands freed memory
back to the system (`release_memory`, on every tick until `RELEASE_S` after the job's
account closed, and the daemon's idle memory is not measured meanwhile: no later job is
judged by what the failed one held); then it fails another only if the memory grows a
further `SLACK` of the limit beyond the highest it reached (memory the allocator keeps is
no reason to fail a job that does not grow). A job running longer than
`limits.max_job_seconds` fails too. A job is failed the way a cancel stops it: its
`on_fail` (the daemon's) reports it FAILED and closes its mailbox, and the job's own
checks (`JobBudget.check`: between the blocks of a table being read and every few
hundred of its columns, at every round)
raise the error in its thread, so a job busy loading or computing stops there too. Its
peers and every other job on the daemon go on; the kernel's OOM killer never chooses.
The same check holds `limits.max_rows` against the rows the job's table reader has read:
a table larger than its estimate fails the job before it is all read.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa
from vfl.contract.logs import job_context
from vfl.party.errors import LimitExceeded, MemoryLimitExceeded
from vfl.party.limits import (
    JobEstimate,
    Limits,
    admit,
    too_many_parameters,
    too_many_rows,
    too_much_memory,
)
from vfl.party.memory import ProcessTree

log = logging.getLogger(__name__)

PENDING_S = 10.0  # after failing a job for memory, how long it waits for that job to stop
RELEASE_S = 3.0  # after a failed job's account closes, how long each tick hands memory back
SLACK = 0.05  # ... then it fails another only if the memory grew this share of the limit


@dataclass
class JobBudget:
    """One job's account with the guard: its estimate, when it started running, and the
    error it was failed with (None while it may go on)."""

    job_id: str
    estimate: JobEstimate
    started: float | None = None  # time.monotonic() when its thread started
    failure: LimitExceeded | None = None
    on_fail: Callable[[LimitExceeded], None] | None = None  # set once the job is held
    opened: float = field(default_factory=time.monotonic)
    read_bytes: int = 0  # the most its table reader said it had read
    max_rows: int | None = None  # the party's limit on the rows its tables hold

    @property
    def held_bytes(self) -> int:
        """What the job holds by the best account: its estimate, with the table's part
        replaced by what it read where it read more (a table larger than estimated, or
        one whose size could not be known, as a database's)."""
        return self.estimate.bytes + max(0, self.read_bytes - self.estimate.table_bytes)

    def check(self, read_bytes: int = 0, read_rows: int = 0) -> None:
        """Between blocks of a table read (with the bytes and rows of its tables read so
        far) and at every round.

        Raises:
            LimitExceeded: the guard failed this job (over memory or time), or its tables
                hold more rows than max_rows (whatever its estimate said)."""
        self.read_bytes = max(self.read_bytes, read_bytes)
        if self.failure is not None:
            raise self.failure
        if self.max_rows is not None and read_rows > self.max_rows:
            raise too_many_rows(f"at least {read_rows:,}", self.max_rows)


class Guard:
    """Admission and the watchdog of one party daemon's limits.

    Args:
        party_id: the daemon's party (its log lines).
        limits: the party config's `limits:`.
        held: the jobs the daemon holds now (loading, prepared or running); the account
            of a job that never started and is not among them is closed.
        sample: the bytes the daemon's process tree holds (default: a `ProcessTree` of
            this process, `party.memory`).
        interval_s: how often the watchdog samples.
        pending_s: after failing a job for memory, how long it fails no other.
    """

    def __init__(
        self,
        party_id: str,
        limits: Limits,
        held: Callable[[], set[str]],
        sample: Callable[[], int] | None = None,
        interval_s: float = 0.2,
        pending_s: float = PENDING_S,
    ) -> None:
        self.party_id, self.limits, self._pending_s = party_id, limits, pending_s
        sample = ProcessTree() if sample is None else sample
        self._held, self._sample, self._interval = held, sample, interval_s
        self._lock = threading.Lock()
        self._budgets: dict[str, JobBudget] = {}
        self.idle_bytes = sample()  # the tree with no job: updated while none is held
        self._quiet_until = 0.0
        self._failed_at: int | None = None  # the memory when it last failed a job for it
        self._release_until = 0.0  # until then, each tick hands freed memory back
        # the idle memory before the guard last failed a job: no later measure exceeds it
        # until a job ends here without failure (what the allocator kept of the failed
        # job's is no reason to refuse the next one; the watchdog still sees real growth)
        self._idle_cap: int | None = None
        self._capped_at = 0.0  # when the cap was set: a job opened since clears it
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="limits-guard", daemon=True)
        self._thread.start()
        log.info(
            "party %s: limits: memory_gb %g, max_parameters %d, max_rows %d, "
            "max_concurrent_jobs %d, max_job_seconds %g",
            party_id,
            limits.memory_gb,
            limits.max_parameters,
            limits.max_rows,
            limits.max_concurrent_jobs,
            limits.max_job_seconds,
        )

    def admit(self, job_id: str, estimate: JobEstimate) -> JobBudget:
        """Open job `job_id`'s account if it fits this party now (`party.limits.admit`).

        Raises:
            LimitExceeded: the job is over a limit on its own.
            PartyBusy: it fits alone, but not beside the jobs held now.
        """
        with self._lock:
            self._close_ended({job_id})
            others = [b for b in self._budgets.values() if b.job_id != job_id]
            admit(estimate, self.limits, len(others), self.idle_bytes, self._sample())
            budget = JobBudget(job_id, estimate, max_rows=self.limits.max_rows)
            self._budgets[job_id] = budget
        log.info(
            "party %s: admitted, estimated %.1f MiB (%d parameters)",
            self.party_id,
            estimate.bytes / 2**20,
            estimate.parameters,
        )
        return budget

    def check_model(self, budget: JobBudget, parameters: int, each: int) -> None:
        """Before job `budget` builds its model: the `parameters` its loaded inputs make
        (embeddings included, which its estimate could not count), `each` bytes apiece.

        Raises:
            LimitExceeded: over max_parameters, or the memory the daemon holds now leaves
                no room for the parameters beyond the estimate.
        """
        if parameters > self.limits.max_parameters:
            raise too_many_parameters(parameters, self.limits)
        extra = max(0, parameters - budget.estimate.parameters) * each
        now = self._sample()
        if extra and now + extra > self.limits.memory_bytes:
            raise too_much_memory(budget.estimate.bytes + extra, now, self.limits)

    def budget(self, job_id: str) -> JobBudget | None:
        with self._lock:
            return self._budgets.get(job_id)

    def close(self, budget: JobBudget) -> None:
        """Close a job's account: its PREPARE failed, or its thread ended. (The account of
        a job that never started closes once the daemon no longer holds it.)"""
        with self._lock:
            if self._budgets.get(budget.job_id) is not budget:
                return
            del self._budgets[budget.job_id]
            if budget.failure is not None:  # what it held is freed as its error unwinds
                self._release_until = time.monotonic() + RELEASE_S
                if self._idle_cap is None:
                    self._idle_cap, self._capped_at = self.idle_bytes, time.monotonic()
            elif budget.started is not None and budget.opened > self._capped_at:
                self._idle_cap = None  # a job admitted since ran to its end
        if budget.failure is not None:
            release_memory()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _close_ended(self, keep: set[str]) -> bool:
        """Close the accounts of jobs the daemon no longer holds (call with the lock);
        returns whether one of them was failed by the guard."""
        held = self._held() | keep
        ended = [j for j, b in self._budgets.items() if j not in held and b.started is None]
        failed = any(self._budgets[j].failure is not None for j in ended)
        for job_id in ended:
            del self._budgets[job_id]
        return failed

    def _watch(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._tick()
            except Exception:  # noqa: BLE001 - the watchdog outlives any one sample
                log.exception("party %s: the limits guard's check failed", self.party_id)

    def _tick(self) -> None:
        now = time.monotonic()
        with self._lock:
            fresh = {j for j, b in self._budgets.items() if now - b.opened < 1.0}
            if self._close_ended(fresh):  # (a job just admitted may not be held yet)
                self._release_until = now + RELEASE_S
            if now < self._release_until:  # a failed job's memory, back to the system
                release_memory()
            total = self._sample()
            now = time.monotonic()  # the sample's time: releasing memory above may be slow
            if not self._budgets:
                if now >= self._release_until:  # not while a failed job's memory goes
                    cap = self._idle_cap
                    self.idle_bytes = total if cap is None else min(total, cap)
                return
            live = [b for b in self._budgets.values() if b.failure is None]
        for budget in live:
            if budget.started is not None and now - budget.started > self.limits.max_job_seconds:
                self._fail(budget, self._too_long(now - budget.started))
        limit = self.limits.memory_bytes
        if total <= limit:
            self._failed_at = None
            return
        if self._failed_at is not None:
            if now < self._quiet_until:  # the failed job stops; its memory is handed back
                self._failed_at = max(self._failed_at, total)
                release_memory()
                return
            if total <= self._failed_at + SLACK * limit:
                return  # what the failed job left with the allocator: no job grows
        if live:
            victim = max(live, key=lambda b: (b.held_bytes, b.opened))
            self._quiet_until, self._failed_at = now + self._pending_s, total
            self._fail(victim, self._too_big(total))

    def _too_big(self, total: int) -> MemoryLimitExceeded:
        return MemoryLimitExceeded(
            f"the party's memory reached {total / 2**30:.2f} GiB while this job ran, over "
            f"its limit memory_gb = {self.limits.memory_gb:g}, and this job is the largest "
            "it holds; its data or model is larger than estimated: use a smaller dataset "
            "or model, or ask the party's operator to raise limits.memory_gb in its config"
        )

    def _too_long(self, seconds: float) -> LimitExceeded:
        return LimitExceeded(
            f"the job ran {seconds:.0f} s here, over this party's limit max_job_seconds = "
            f"{self.limits.max_job_seconds:g}; train fewer epochs or rows, or ask the "
            "party's operator to raise limits.max_job_seconds in its config"
        )

    def _fail(self, budget: JobBudget, error: LimitExceeded) -> None:
        budget.failure = error
        with job_context(budget.job_id):
            log.warning("party %s: failing the job: %s", self.party_id, error)
        if budget.on_fail is not None:  # it reports and stops the job: not in the watchdog
            threading.Thread(
                target=budget.on_fail, args=(error,), name=f"fail-{budget.job_id}", daemon=True
            ).start()


def release_memory() -> None:
    """Hand memory freed by a failed job back to the system: Python's garbage, Arrow's
    pool, and glibc's free lists (`malloc_trim`, where the C library has it)."""
    gc.collect()
    pa.default_memory_pool().release_unused()
    name = ctypes.util.find_library("c")
    if name is not None:
        trim = getattr(ctypes.CDLL(name), "malloc_trim", None)
        if trim is not None:
            trim(0)
