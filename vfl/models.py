"""Typed views of the models a federation holds, for the Python API: `Model` (one trained
model: who holds a part, its state and metrics) and `ModelPart` (one party's part)."""

from __future__ import annotations

from dataclasses import dataclass, field

from vfl.contract.states import model_state_name
from vfl.proto import coordinator_pb2 as pb


@dataclass(frozen=True)
class ModelPart:
    """What one party said of its part: its role, how many input columns the part reads,
    when it was kept (unix time), for blindfl its Paillier key's fingerprint and, while
    the model is served there, the tables its online scoring cannot use now (a serving
    table that does not fit the model, a changed file that did not load) and why.
    `problem` says why the part cannot score (it is corrupt); "" when it can."""

    party_id: str
    role: str
    columns: int
    created_at: float
    key_fingerprint: str
    table_problems: dict[str, str] = field(default_factory=dict)
    problem: str = ""


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
            parts=tuple(
                ModelPart(
                    p.party_id,
                    p.role,
                    int(p.columns),
                    p.created_at,
                    p.key_fingerprint,
                    dict(p.table_problems),
                    p.problem,
                )
                for p in m.parts
            ),
        )

    @property
    def available(self) -> bool:
        """True if every party holds its part: the model can score."""
        return self.state == "available"

    @property
    def deleted(self) -> bool:
        """True once every party dropped its part."""
        return self.state == "deleted"
