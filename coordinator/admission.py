"""Admission: which stored jobs launch now, and the queue of those that wait (QUEUED).

Each party tells, in GetPartyInfo, how many jobs it holds and its `max_concurrent_jobs`
(`party.limits`). A job launches when every one of its parties has room; else it waits
QUEUED, in the job store (so the queue survives a restart of the coordinator), oldest
first at each party: a job never overtakes an older queued job that needs one of its
parties. The launcher launches the queued jobs that have room whenever a job ends, and
the coordinator's monitor looks every few seconds (`Lifecycle.admit_queued`), and when a
party registers. A job whose parties have not all registered yet (they are still
starting) waits QUEUED too, up to `register_wait_s` after it was submitted; then it
launches, and fails naming the parties that never registered. The party
enforces its limits itself at PREPARE (`party.guard`); a job it refuses as busy there
(a race, or memory the jobs it holds leave no room for) comes back here QUEUED.
"""

from __future__ import annotations

import logging
import threading
import time

import grpc
from vfl.contract.logs import job_context
from vfl.contract.states import QUEUED, JobState
from vfl.coordinator.errors import PartyUnavailable, PartyUnregistered
from vfl.coordinator.party_control import PartyControl
from vfl.coordinator.specs import SpecCache
from vfl.coordinator.store import JobStore

log = logging.getLogger(__name__)

REQUEUE_WAIT_S = 10.0  # a job a party refused as busy waits at least this long to try again
REGISTER_WAIT_S = 60.0  # how long a submitted job waits for its parties to register


class Admission:
    """Args:
    store: the job database (the QUEUED jobs and their order).
    control: the control plane (each party's jobs and limit).
    specs: the jobs' parsed specs (their parties).
    register_wait_s: how long after its submission a job waits for parties that have not
        registered yet (the coordinator's `--register-wait-s`).
    """

    def __init__(
        self,
        store: JobStore,
        control: PartyControl,
        specs: SpecCache,
        register_wait_s: float = REGISTER_WAIT_S,
    ) -> None:
        self._store, self._control, self._specs = store, control, specs
        self._register_wait_s = register_wait_s
        self._lock = threading.Lock()
        self._launching: dict[str, frozenset[str]] = {}  # job -> its parties, until prepared
        self._not_before: dict[str, float] = {}  # job -> when a requeued job may try again

    def claim(self, job_id: str, current: JobState) -> bool:
        """Whether job `job_id` (in state `current`) launches now; if not, it is QUEUED
        with the reason. A claimed job counts at its parties until `released`."""
        with self._lock:
            queued = [j for j in self._store.in_states(QUEUED) if j != job_id]
            ahead = {p for j in queued for p in self._parties(j)}
            waits = self._waits(job_id, ahead)
            if waits is None:
                self._launching[job_id] = self._parties(job_id)
                return True
        if current != QUEUED and self._store.set_state(job_id, QUEUED, waits, expect=current):
            with job_context(job_id):
                log.info("job %s QUEUED: %s", job_id, waits)
        return False

    def claim_queued(self) -> list[str]:
        """The QUEUED jobs that launch now, oldest first (each is claimed, see `claim`);
        a job waits behind an older one that needs one of its parties."""
        claimed: list[str] = []
        with self._lock:
            blocked: set[str] = set()
            now = time.monotonic()
            for job_id in self._store.in_states(QUEUED):
                parties = self._parties(job_id)
                if now < self._not_before.get(job_id, 0.0):
                    blocked |= parties
                elif self._waits(job_id, blocked) is None:
                    self._not_before.pop(job_id, None)
                    self._launching[job_id] = parties
                    claimed.append(job_id)
                else:
                    blocked |= parties
        return claimed

    def released(self, job_id: str) -> None:
        """Job `job_id`'s parties have answered PrepareJob (they list it themselves now),
        or its launch ended."""
        with self._lock:
            self._launching.pop(job_id, None)

    def requeue(self, job_id: str, reason: str) -> None:
        """A party refused a launched job as busy (the memory its jobs hold, which its
        GetPartyInfo does not tell): it waits QUEUED again, `REQUEUE_WAIT_S` at least."""
        with self._lock:
            self._not_before[job_id] = time.monotonic() + REQUEUE_WAIT_S
        if self._store.set_state(job_id, QUEUED, reason):
            log.info("job %s QUEUED: %s", job_id, reason)

    def _parties(self, job_id: str) -> frozenset[str]:
        return frozenset(p.id for p in self._specs.spec(job_id).parties)

    def _waits(self, job_id: str, blocked: set[str]) -> str | None:
        """Why job `job_id` cannot launch now (None: it can); call with the lock held. A
        party that does not answer counts as having room (its launch says what is wrong)."""
        parties = sorted(self._parties(job_id))
        behind = [p for p in parties if p in blocked]
        if behind:
            return f"waiting behind an older queued job at party '{behind[0]}'"
        try:
            addresses = self._control.addresses(self._specs.spec(job_id))
        except PartyUnregistered as exc:
            waited = time.time() - self._store.get(job_id).created_at
            if waited >= self._register_wait_s:
                return None  # its launch fails, naming them
            many = len(exc.missing) > 1
            return (
                f"waiting for part{'ies' if many else 'y'} {exc.missing} to register with this "
                f"coordinator (up to {self._register_wait_s:g} s after the job was submitted; "
                f"start {'each' if many else 'it'} with `vfl party serve --config party.yaml`)"
            )
        except PartyUnavailable:
            return None
        for party in parties:
            try:
                info = self._control.info(party, addresses[party])
            except grpc.RpcError:
                continue
            limit = info.max_concurrent_jobs
            launching = {j for j, ps in self._launching.items() if party in ps}
            held = (set(info.running_jobs) | launching) - {job_id}
            if limit and len(held) >= limit:
                return (
                    f"waiting for a free slot at party '{party}': it holds {len(held)} "
                    f"job{'s' if len(held) != 1 else ''}, its limit max_concurrent_jobs"
                )
        return None
