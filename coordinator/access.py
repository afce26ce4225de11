"""Who may use the coordinator's user RPCs (docs/security.md, "Certificates and who may
call what").

With TLS every caller has an identity: the party id its certificate names. An identity is
a *party* of a job if the job names it or if it is a registered party (a party daemon
registered under that id, kept in the job database). A party may list and read (`vfl
jobs`, `status`, `watch`) the jobs that name it, and may not submit, cancel or resume a job;
likewise it may list and show (`vfl models`, `models show`) the models it holds a part of
(a model is its training job), and may not delete any. For every other job, any other
identity of the federation is an *operator* (e.g. `admin`) with full control. Without TLS
there are no identities (the caller is None) and everything is allowed.

A certificate names an identity, not a role: an identity that never registered is a party
only of the jobs that name it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from vfl.contract.spec import JobSpec
from vfl.coordinator.errors import AccessDenied
from vfl.coordinator.store import JobRecord, JobStore

_MAY = "may list and read the jobs it is in (vfl jobs, status, watch)"
_MAY_MODELS = "may list and show the models it holds a part of (vfl models, models show)"
_OPERATOR = "an operator's certificate (e.g. 'admin': vfl certs issue DIR --party admin)"


class Access:
    """The user RPCs' permission checks; each raises `AccessDenied` naming the caller and
    what it may do. They read the store, so call them off the event loop.

    Args:
        store: the job database (its party registry).
        spec_of: a job's parsed spec (`Lifecycle.spec`).
    """

    def __init__(self, store: JobStore, spec_of: Callable[[str], JobSpec]) -> None:
        self._store, self._spec_of = store, spec_of
        self._lock = threading.Lock()
        self._parties: dict[str, frozenset[str]] = {}  # job id -> its party ids (never change)

    def visible(self, caller: str | None, records: list[JobRecord]) -> list[JobRecord]:
        """The jobs of `records` that `caller` may list: a registered party's own, else all."""
        if caller is None or not self._registered(caller):
            return records
        return [r for r in records if caller in self._parties_of(r.job_id)]

    def party_ids(self, caller: str | None, registered: list[str]) -> list[str]:
        """The registered parties of `registered` whose health `caller` may see (the
        dashboard): an operator every one, a registered party only itself."""
        if caller is None or not self._registered(caller):
            return registered
        return [p for p in registered if p == caller]

    def check_read(self, caller: str | None, job_id: str) -> None:
        """`caller` may read job `job_id` (GetJob, WatchJob)."""
        if caller is None or caller in self._parties_of(job_id) or not self._registered(caller):
            return
        raise AccessDenied(f"'{caller}' is a party: it {_MAY}; job {job_id} is not one of them")

    def check_submit(self, caller: str | None, spec: JobSpec) -> None:
        """`caller` may submit the job `spec` (parsed once, by the servicer)."""
        if caller is None:
            return
        if self._registered(caller) or caller in {p.id for p in spec.parties}:
            raise AccessDenied(
                f"'{caller}' is a party: it {_MAY} but may not submit jobs; "
                f"submitting needs {_OPERATOR}"
            )

    def check_predict(self, caller: str | None, model_id: str) -> None:
        """`caller` may score with model `model_id` (submit a prediction job)."""
        self._operator_only(caller, model_id, _MAY, "submit predictions")

    def check_control(self, caller: str | None, job_id: str, action: str) -> None:
        """`caller` may `action` ("cancel", "resume") job `job_id`."""
        self._operator_only(caller, job_id, _MAY, f"{action} job {job_id}")

    def check_model_read(self, caller: str | None, model_id: str) -> None:
        """`caller` may show model `model_id` (GetModel); list with `visible`."""
        if caller is None or caller in self._parties_of(model_id) or not self._registered(caller):
            return
        raise AccessDenied(
            f"'{caller}' is a party: it {_MAY_MODELS}; model {model_id} is not one of them"
        )

    def check_delete_model(self, caller: str | None, model_id: str) -> None:
        """`caller` may delete model `model_id`."""
        self._operator_only(caller, model_id, _MAY_MODELS, f"delete model {model_id}")

    def check_operator(self, caller: str | None, action: str) -> None:
        """`caller` is an operator (no registered party) and may `action`."""
        if caller is not None and self._registered(caller):
            raise AccessDenied(
                f"'{caller}' is a party and may not {action}; that needs {_OPERATOR}"
            )

    def _operator_only(self, caller: str | None, job_id: str, may: str, action: str) -> None:
        """Raises AccessDenied if `caller` is a party (of `job_id`, or registered): it
        `may` do only that, not `action`."""
        if caller is None:
            return
        if caller in self._parties_of(job_id) or self._registered(caller):
            raise AccessDenied(
                f"'{caller}' is a party: it {may} but may not {action}; that needs {_OPERATOR}"
            )

    def _registered(self, caller: str) -> bool:
        return caller in self._store.parties()

    def _parties_of(self, job_id: str) -> frozenset[str]:
        with self._lock:
            ids = self._parties.get(job_id)
        if ids is None:
            ids = frozenset(p.id for p in self._spec_of(job_id).parties)
            with self._lock:
                self._parties[job_id] = ids
        return ids
