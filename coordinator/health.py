"""The party health monitor: running jobs whose parties stopped answering or lost the job
are paused (their checkpoints stay; `vfl resume` continues them).

A party gets `grace_s` to answer again before its jobs pause; a party that was not yet
sent PrepareJob for a job (the job is still launching) only needs to answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import grpc

from coordinator.party_control import PartyControl
from coordinator.spec import JobSpec
from coordinator.states import RUNNING
from coordinator.store import JobStore

Lose = Callable[[str, JobSpec, str], None]


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
        try:
            running = self._control.running_jobs(party_id, address)
        except grpc.RpcError as exc:
            return (
                f"party '{party_id}' at {address} stopped answering during the job "
                f"({self._control.explain(exc, address, party_id)})"
            )
        if holds_job and job_id not in running:
            return f"party '{party_id}' no longer runs job {job_id} (was its daemon restarted?)"
        return None
