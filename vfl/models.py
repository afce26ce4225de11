"""Typed views of the models a federation holds, for the Python API: `Model` (one trained
model: who holds a part, its state and metrics) and `ModelPart` (one party's part)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vfl.contract.states import model_state_name
from vfl.proto import coordinator_pb2 as pb, party_pb2


@dataclass(frozen=True)
class ModelPart:
    """What one party said of its part: its role, how many input columns the part reads,
    when it was kept (unix time), for blindfl its Paillier key's fingerprint and, while
    the model is served there, the tables its online scoring cannot use now (a serving
    table that does not fit the model, a changed file that did not load) and why.
    `problem` says why the part cannot score (it is corrupt); "" when it can. `drift`
    counts the cells of the rows it scored since it was kept that lie outside what its
    preprocessing was fitted on (out_of_range, unknown_categories, unexpected_missing;
    empty when the party did not say)."""

    party_id: str
    role: str
    columns: int
    created_at: float
    key_fingerprint: str
    table_problems: dict[str, str] = field(default_factory=dict)
    problem: str = ""
    drift: dict[str, int] = field(default_factory=dict)

    @staticmethod
    def from_proto(p: pb.ModelHolding) -> ModelPart:
        return ModelPart(
            party_id=p.party_id,
            role=p.role,
            columns=int(p.columns),
            created_at=p.created_at,
            key_fingerprint=p.key_fingerprint,
            table_problems=dict(p.table_problems),
            problem=p.problem,
            drift=drift_counts(p.drift) if p.HasField("drift") else {},
        )

    def to_plain(self) -> dict[str, Any]:
        """The part as `vfl models --json` prints it (the coordinator's field names)."""
        plain: dict[str, Any] = {
            "party_id": self.party_id,
            "role": self.role,
            "created_at": self.created_at,
            "key_fingerprint": self.key_fingerprint,
            "columns": self.columns,
        }
        if self.drift:
            plain["drift"] = dict(self.drift)
        return {**plain, "table_problems": dict(self.table_problems), "problem": self.problem}


@dataclass(frozen=True)
class Model:
    """A model the federation holds: the training job `model_id` that made it.

    `state` is "available", "incomplete" (some party holds no part), "corrupt" (some
    party's part is damaged: its `problem` says how), "deleting" (some
    party has not dropped its part yet) or "deleted". Of `parties` (every party of the
    model), `holders` hold a part, `missing` answered without one and `unreachable` did
    not answer. `deleted_at` is the unix time a delete was asked for, else None.
    """

    model_id: str
    name: str
    protocol: str
    state: str
    created_at: float
    metrics: dict[str, float]
    parties: tuple[str, ...]
    holders: tuple[str, ...]
    missing: tuple[str, ...]
    unreachable: tuple[str, ...]
    deleted_at: float | None
    parts: tuple[ModelPart, ...]

    @staticmethod
    def from_proto(m: pb.ModelSummary) -> Model:
        return Model(
            model_id=m.model_id,
            name=m.name,
            protocol=m.protocol,
            state=model_state_name(m.state),
            created_at=m.created_at,
            metrics=dict(m.metrics),
            parties=tuple(m.parties),
            holders=tuple(m.holders),
            missing=tuple(m.missing),
            unreachable=tuple(m.unreachable),
            deleted_at=m.deleted_at or None,
            parts=tuple(ModelPart.from_proto(p) for p in m.parts),
        )

    def to_plain(self) -> dict[str, Any]:
        """The model as `vfl models --json` prints it: every field under the coordinator's
        names, its state by name ("available"), `deleted_at` 0 when never deleted."""
        return {
            "model_id": self.model_id,
            "name": self.name,
            "protocol": self.protocol,
            "state": self.state,
            "created_at": self.created_at,
            "metrics": dict(self.metrics),
            "parties": list(self.parties),
            "holders": list(self.holders),
            "missing": list(self.missing),
            "unreachable": list(self.unreachable),
            "deleted_at": self.deleted_at or 0.0,
            "parts": [p.to_plain() for p in self.parts],
        }

    @property
    def available(self) -> bool:
        """True if every party holds its part: the model can score."""
        return self.state == "available"

    @property
    def deleted(self) -> bool:
        """True once every party dropped its part."""
        return self.state == "deleted"


def drift_counts(drift: party_pb2.DriftCounts) -> dict[str, int]:
    """A party's drift counts by name (out_of_range, unknown_categories,
    unexpected_missing)."""
    return {f.name: int(getattr(drift, f.name)) for f in drift.DESCRIPTOR.fields}
