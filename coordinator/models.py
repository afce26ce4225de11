"""The models the federation holds: `vfl models`, `vfl models show M`, `vfl models delete M`.

A model is a training job that SUCCEEDED, under that job's id. Each party of the job
keeps its own part in its state directory (`party.state.model_store`); no part ever leaves its
party, and the coordinator keeps none. It asks the parties which parts they keep
(`ListModelParts`: summaries without paths or column names) and folds their answers and
the job store's deletions into a `ModelSummary` whose state is

    AVAILABLE   no party that answered lacks its part (those that did not answer are
                listed as unreachable)
    INCOMPLETE  a party answered that it holds no part of it
    CORRUPT     every party that answered holds its part, but some party's part is
                corrupt (its file fails its hash, cannot be read or does not match its
                manifest): it cannot score; the party's part says why
    DELETING    deleted, and some party has not yet confirmed that it dropped its part:
                it is listed as still holding one
    DELETED     deleted at every party: no longer listed; `show` says when

A delete is kept in the job store (`model_deletions`) with the parties still to confirm;
they are asked again by every later list, show or delete, and when one of them registers
again. A deleted model cannot score (`Lifecycle.submit_prediction`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence

from vfl.contract.spec import JobSpec
from vfl.contract.states import (
    AVAILABLE,
    CORRUPT,
    DELETED,
    DELETING,
    INCOMPLETE,
    SUCCEEDED,
    state_name,
)
from vfl.coordinator.errors import UnknownJob, UnknownModel
from vfl.coordinator.party_control import PartyControl
from vfl.coordinator.store import JobRecord, JobStore, ModelDeletion
from vfl.proto import coordinator_pb2 as pb, party_pb2

log = logging.getLogger(__name__)

REGISTERED_WAIT_S = 10.0  # a party that registers again: how long its channel may take
Answers = Mapping[str, Sequence[party_pb2.ModelPart] | None]  # per party; None: no answer


def deleted_on(deletion: ModelDeletion) -> str:
    """When a delete was requested, for messages: "2026-11-24 04:23:57 UTC"."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(deletion.requested_at))


def ended_at(record: JobRecord) -> float:
    """When a job ended: its launch plus its own duration; else its last update (a job
    that ended while the coordinator was down was updated only once it was back)."""
    result = record.result
    if result.started_at and result.seconds:
        return result.started_at + result.seconds
    return record.updated_at


def summarise(
    record: JobRecord, spec: JobSpec, answers: Answers, deletion: ModelDeletion | None
) -> pb.ModelSummary:
    """A model's summary from its training job, what its parties answered (`answers`,
    per party its parts or None) and its delete, if any."""
    parties = [p.id for p in spec.parties]
    parts = {
        pid: part
        for pid in parties
        for part in answers.get(pid) or ()
        if part.model_id == record.job_id
    }
    unreachable = [p for p in parties if answers.get(p) is None]
    if deletion is None:
        holders = [p for p in parties if p in parts]
        missing = [p for p in parties if p not in parts and p not in unreachable]
        corrupt = [p for p in holders if parts[p].problem]
        state = INCOMPLETE if missing else CORRUPT if corrupt else AVAILABLE
    else:  # a party not yet confirmed holds its part, as far as anyone knows
        holders = [p for p in parties if p in deletion.pending]
        missing, unreachable = [], [p for p in unreachable if p in holders]
        parts = {p: part for p, part in parts.items() if p in holders}
        state = DELETING if holders else DELETED
    return pb.ModelSummary(
        model_id=record.job_id,
        name=record.name,
        protocol=spec.protocol,
        state=state,
        created_at=ended_at(record),
        metrics=dict(record.result.metrics),
        parties=parties,
        holders=holders,
        missing=missing,
        unreachable=unreachable,
        deleted_at=0.0 if deletion is None else deletion.requested_at,
        parts=[
            pb.ModelHolding(
                party_id=pid,
                role=part.role,
                created_at=part.created_at,
                key_fingerprint=part.key_fingerprint,
                columns=part.columns,
                drift=part.drift,
                table_problems=dict(part.table_problems),
                problem=part.problem,
            )
            for pid, part in parts.items()
        ],
    )


class Models:
    """Args:
    store: the job database (jobs, deletions, the party registry).
    control: the calls to the parties.
    spec_of: a job's parsed spec (`Lifecycle.spec`).
    """

    def __init__(
        self, store: JobStore, control: PartyControl, spec_of: Callable[[str], JobSpec]
    ) -> None:
        self._store, self._control, self._spec_of = store, control, spec_of

    def records(self) -> list[JobRecord]:
        """The training jobs that SUCCEEDED (the models), deleted ones included."""
        return [r for r in self._store.jobs() if self._is_model(r)]

    def record(self, model_id: str) -> JobRecord:
        """The training job of model `model_id`.

        Raises:
            UnknownModel: no such job, or a job that left no model (names the fix).
        """
        try:
            record = self._store.get(model_id)
        except UnknownJob:
            raise UnknownModel(f"no model {model_id}; list them with `vfl models`") from None
        if not self._is_model(record):
            what = "a prediction" if record.state == SUCCEEDED else state_name(record.state)
            raise UnknownModel(
                f"no model {model_id}: job {model_id} is {what}, so it left no model; "
                "list the models with `vfl models`"
            )
        return record

    def summaries(self, records: list[JobRecord]) -> list[pb.ModelSummary]:
        """The summaries of the models `records` (of `records()`) not deleted everywhere.
        Every party of them is asked once, all at once; deletes still pending at a party
        that answered are done now."""
        deletions = self._store.model_deletions()
        live = [r for r in records if not (r.job_id in deletions and deletions[r.job_id].complete)]
        specs = {r.job_id: self._spec_of(r.job_id) for r in live}
        answers = self._control.model_parts(
            sorted({p.id for spec in specs.values() for p in spec.parties})
        )
        summaries = [
            self._summary(r, specs[r.job_id], answers, deletions.get(r.job_id)) for r in live
        ]
        return [s for s in summaries if s.state != DELETED]

    def get(self, record: JobRecord) -> pb.ModelSummary:
        """The summary of the model of `record` (of `record()`), also once deleted."""
        spec = self._spec_of(record.job_id)
        deletion = self._store.model_deletion(record.job_id)
        if deletion is not None and deletion.complete:
            return summarise(record, spec, {}, deletion)
        answers = self._control.model_parts([p.id for p in spec.parties])
        return self._summary(record, spec, answers, deletion)

    def delete(self, record: JobRecord) -> pb.ModelSummary:
        """Delete the model of `record`: every party drops its part; those that do not
        answer stay pending (asked again later) and are listed as still holding one. A
        model deleted before is asked of its pending parties again."""
        spec = self._spec_of(record.job_id)
        deletion = self._store.delete_model(record.job_id, [p.id for p in spec.parties])
        log.info("model %s: delete requested (pending at %s)", record.job_id, deletion.pending)
        answered = self._control.delete_model_parts(record.job_id, deletion.pending)
        deletion = self._dropped(deletion, [p for p, held in answered.items() if held is not None])
        answers: Answers = {p: None if held is None else [] for p, held in answered.items()}
        return summarise(record, spec, answers, deletion)

    def pending_at(self, party_id: str) -> list[str]:
        """The deleted models whose part party `party_id` has not yet confirmed dropping."""
        return sorted(m for m, d in self._store.model_deletions().items() if party_id in d.pending)

    def retry(self, party_id: str) -> None:
        """Party `party_id` registered again: have it drop its parts of deleted models."""
        for model_id in self.pending_at(party_id):
            answered = self._control.delete_model_parts(model_id, [party_id], REGISTERED_WAIT_S)
            deletion = self._store.model_deletion(model_id)
            if answered[party_id] is not None and deletion is not None:
                self._dropped(deletion, [party_id])

    def _summary(
        self, record: JobRecord, spec: JobSpec, answers: Answers, deletion: ModelDeletion | None
    ) -> pb.ModelSummary:
        """`summarise`, once the pending parties of a delete that answered have dropped
        their parts (those still listing one are told again)."""
        if deletion is not None and deletion.pending:
            answered = [p for p in deletion.pending if answers.get(p) is not None]
            holding = [
                p for p in answered if any(m.model_id == record.job_id for m in answers[p] or ())
            ]
            told = self._control.delete_model_parts(record.job_id, holding) if holding else {}
            confirmed = [p for p in answered if p not in holding or told.get(p) is not None]
            deletion = self._dropped(deletion, confirmed)
        return summarise(record, spec, answers, deletion)

    def _dropped(self, deletion: ModelDeletion, parties: list[str]) -> ModelDeletion:
        """`parties` confirmed they hold no part of the deleted model any more."""
        if not parties:
            return deletion
        now = self._store.dropped(deletion.model_id, parties) or deletion
        log.info("model %s: parties %s dropped their parts", deletion.model_id, parties)
        if now.complete:
            log.info("model %s: deleted at every party", deletion.model_id)
        return now

    def _is_model(self, record: JobRecord) -> bool:
        return record.state == SUCCEEDED and self._spec_of(record.job_id).predict is None
