"""The dashboard's read model: plain, JSON-ready views of the coordinator's own objects.

Nothing here keeps state of its own: jobs come from the job store (`coordinator.views`,
the same summaries, views and reports the gRPC API serves, and `coordinator.curves`),
models from `coordinator.models`, parties from the registry and the health monitor's
contacts (`coordinator.health`). Who sees what is `coordinator.access`'s decision, as for
the gRPC API: `caller` None (the token) reads everything, a party's certificate what that
party may read. Every call reads the store or asks parties: call it off the event loop.
"""

from __future__ import annotations

import time
from typing import Any

from vfl.contract.curves import curves
from vfl.contract.states import state_name
from vfl.coordinator.access import Access
from vfl.coordinator.client import JobView, model_to_plain
from vfl.coordinator.lifecycle import Lifecycle
from vfl.coordinator.views import report, view
from vfl.rpc.serde import to_plain

PROBE_AGE_S = 5.0  # a party probed less than this long ago is not probed again


class Dashboard:
    """Args:
    lifecycle: the coordinator's life cycle (its store, models and health monitor).
    """

    def __init__(self, lifecycle: Lifecycle) -> None:
        self._life = lifecycle
        self._store = lifecycle.store
        self._access = Access(self._store, lifecycle.spec)

    def jobs(self, caller: str | None) -> list[dict[str, Any]]:
        """The jobs `caller` may list, newest first, with their progress."""
        records = self._access.visible(caller, self._store.jobs())
        out = []
        for record in reversed(records):
            r = record.result
            out.append(
                {
                    "job": record.job_id,
                    "name": record.name,
                    "state": state_name(record.state),
                    "reason": record.reason,
                    "created_at": record.created_at,
                    "updated_at": record.updated_at,
                    "round": r.round,
                    "total_rounds": r.total_rounds,
                    "metrics": dict(r.metrics),
                }
            )
        return out

    def job(self, caller: str | None, job_id: str) -> dict[str, Any]:
        """One job: its view as `vfl status --json` prints it, spec, curves and each
        party's population stability (a prediction's).

        Raises:
            UnknownJob: no such job. AccessDenied: `caller` may not read it.
        """
        record = self._store.get(job_id)
        self._access.check_read(caller, job_id)
        full = report(self._store, record)
        return {
            **JobView.from_response(view(record)).to_plain(),
            "name": record.name,
            "created_at": record.created_at,
            "updated_at": record.updated_at,
            "started_at": record.result.started_at,
            "spec_yaml": record.spec_yaml,
            "parties": [{"id": p.id, "role": p.role} for p in self._life.spec(job_id).parties],
            "stability": {  # a prediction's, by party
                p: to_plain(t.stability)
                for p, t in record.result.parties.items()
                if t.HasField("stability")
            },
            "curves": curves(full).to_plain(),
        }

    def parties(self, caller: str | None) -> list[dict[str, Any]]:
        """The registered parties `caller` may see (an operator: all; a party: itself) with
        their health and last contact (parties not probed in `PROBE_AGE_S` seconds are
        probed now, all at once)."""
        contacts = self._life.health.survey(PROBE_AGE_S)
        records = self._store.party_records()
        shown = set(self._access.party_ids(caller, [p.party_id for p in records]))
        out = []
        for p in (r for r in records if r.party_id in shown):
            contact = contacts.get(p.party_id)
            heard = max(p.registered_at, contact.heard_at if contact else 0.0)
            out.append(
                {
                    "party": p.party_id,
                    "address": p.address,
                    "datasets": list(p.datasets),
                    "registered_at": p.registered_at,
                    "last_contact": heard,
                    "seconds_since_contact": round(time.time() - heard, 1),
                    "health": _health(contact.answering if contact else None),
                    "problem": contact.problem if contact else "",
                    "running_jobs": list(contact.running_jobs) if contact else [],
                }
            )
        return out

    def models(self, caller: str | None) -> list[dict[str, Any]]:
        """The models `caller` may list (each party asked, 3 s at most)."""
        models = self._life.models
        return [
            model_to_plain(m)
            for m in models.summaries(self._access.visible(caller, models.records()))
        ]


def _health(answering: bool | None) -> str:
    return {True: "answering", False: "not answering", None: "not probed"}[answering]
