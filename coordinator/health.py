"""The party health monitor: running jobs whose parties stopped answering or lost the job
are paused (their checkpoints stay; `vfl resume` continues them).

A party gets `grace_s` to answer again before its jobs pause; a party that was not yet
sent PrepareJob for a job (the job is still launching) only needs to answer.

`Contacts` keeps, in memory, when the coordinator last heard from each party (its
registration, a report, an answered probe) and how the party's last probe went; the
dashboard shows them (`survey` probes the registered parties not probed lately).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import grpc
from vfl.contract.spec import JobSpec
from vfl.contract.states import RUNNING
from vfl.coordinator.party_control import PartyControl
from vfl.coordinator.store import JobStore

Lose = Callable[[str, JobSpec, str], None]
SURVEY_TIMEOUT_S = 2.0  # how long `survey` waits for a party's answer


@dataclass(frozen=True)
class Contact:
    """What the coordinator knows of a party's health.

    heard_at: unix time it last heard from the party (0: not since it started).
    answering: how the last probe went; None: not probed since the coordinator started.
    problem: why the last probe failed.
    running_jobs: the jobs the party held at the last probe that answered.
    probed_at: unix time of the last probe (0: none).
    up_since: unix time (this clock) the party's daemon started, as of the last probe
        that answered (0: unknown).
    """

    heard_at: float = 0.0
    answering: bool | None = None
    problem: str = ""
    running_jobs: tuple[str, ...] = ()
    probed_at: float = 0.0
    up_since: float = 0.0


class Contacts:
    """The `Contact` of every party this coordinator heard from or probed; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_party: dict[str, Contact] = {}

    def heard(self, party_id: str) -> None:
        """The party called (a registration or a report)."""
        with self._lock:
            self._set(party_id, heard_at=time.time())

    def probed(
        self, party_id: str, running: list[str] | None, problem: str = "", up_for: float = -1.0
    ) -> None:
        """The party answered a probe (`running`: the jobs it holds; `up_for`: seconds its
        daemon has run, < 0 if it did not say), or did not (None)."""
        now = time.time()
        with self._lock:
            if running is None:
                self._set(party_id, answering=False, problem=problem, probed_at=now)
            else:
                self._set(
                    party_id,
                    heard_at=now,
                    answering=True,
                    problem="",
                    running_jobs=tuple(running),
                    probed_at=now,
                    up_since=now - up_for if up_for >= 0 else 0.0,
                )

    def get(self, party_id: str) -> Contact:
        with self._lock:
            return self._by_party.get(party_id, Contact())

    def _set(self, party_id: str, **changes: Any) -> None:
        self._by_party[party_id] = replace(self._by_party.get(party_id, Contact()), **changes)


class PartyHealth:
    """Args:
    store: the job database.
    control: calls to the parties.
    spec_of: the parsed spec of a job.
    holds_job: whether the parties of a job were sent PrepareJob (so must hold it).
    lose: pauses a job whose party was lost, with the reason.
    """

    def __init__(
        self,
        store: JobStore,
        control: PartyControl,
        spec_of: Callable[[str], JobSpec],
        holds_job: Callable[[str], bool],
        lose: Lose,
    ) -> None:
        self._store, self._control = store, control
        self._spec_of, self._holds_job, self._lose = spec_of, holds_job, lose
        self._silent_since: dict[tuple[str, str], float] = {}
        self.contacts = Contacts()

    def survey(self, max_age_s: float, within: float = SURVEY_TIMEOUT_S) -> dict[str, Contact]:
        """The contact of every registered party, after probing (all at once, `within`
        seconds each) those not probed in the last `max_age_s` seconds."""
        known = self._store.parties()
        now = time.time()
        stale = [p for p in known if now - self.contacts.get(p).probed_at > max_age_s]
        if stale:
            with ThreadPoolExecutor(len(stale), thread_name_prefix="survey") as pool:
                for p in stale:
                    pool.submit(self._probe_party, p, known[p], within)
        return {p: self.contacts.get(p) for p in sorted(known)}

    def _probe_party(self, party_id: str, address: str, within: float) -> list[str] | None:
        """The jobs the party holds; None (and the problem kept) if it did not answer."""
        try:
            info = self._control.info(party_id, address, within)
        except grpc.RpcError as exc:
            self.contacts.probed(party_id, None, self._control.explain(exc, address, party_id))
            return None
        running = list(info.running_jobs)
        up_for = info.time - info.started_at if info.started_at else -1.0  # its own clock
        self.contacts.probed(party_id, running, up_for=up_for)
        return running

    def check(self, grace_s: float) -> None:
        """Pause running jobs whose parties have been silent (or lost them) for `grace_s`."""
        known = self._store.parties()
        for job_id in self._store.in_states(*RUNNING):
            spec = self._spec_of(job_id)
            finished = set(self._store.get(job_id).result.parties)
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
                    self._lose(job_id, spec, problem)
                    break

    def _probe(self, party_id: str, address: str, job_id: str, holds_job: bool) -> str | None:
        running = self._probe_party(party_id, address, 5.0)
        if running is None:
            why = self.contacts.get(party_id).problem
            return f"party '{party_id}' at {address} stopped answering during the job ({why})"
        if holds_job and job_id not in running:
            return self._dropped(party_id, job_id)
        return None

    def _dropped(self, party_id: str, job_id: str) -> str:
        """Why party `party_id` answers without job `job_id`: its daemon started after the
        job did (it was stopped or crashed, and restarted), or it dropped the job itself."""
        up_since = self.contacts.get(party_id).up_since
        launched = self._store.get(job_id).result.started_at
        if up_since and launched and up_since > launched:
            when = time.strftime("%H:%M:%S UTC", time.gmtime(up_since))
            return (
                f"party '{party_id}' restarted during the job (its daemon is up since {when}: "
                "it was stopped or crashed) and no longer runs it"
            )
        return f"party '{party_id}' no longer runs job {job_id} (see the log of that party)"
