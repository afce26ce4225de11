"""The harness of `vfl attack`: hands each attack its attacker's view (and only the labels
or rows the threat model lets that attacker know), then scores what the attack inferred
against the truth, after the fact. The truth (the active party's labels, the passive
parties' features) is read from the parties' own recorded views by the harness alone.

One `AttackRow` per attack, attacker and signal: its score, a baseline where there is
one, the band a view that carries nothing lands in, and the verdict. Which attacks run
is the model kind's (`attack.kinds`: `evaluate`); the networks' are in `attack.network`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from vfl.attack.errors import DataError, ViewError
from vfl.attack.stats import auc, chance_band
from vfl.attack.views import PartyView

LEAKS, AT_CHANCE, BY_DESIGN = "leaks", "at chance", "by design"


@dataclass(frozen=True)
class AttackRow:
    attack: str  # norm | direction | model_completion | feature_inference | distinguisher
    attacker: str  # "<party> (<role>)"
    used: str
    score: float
    baseline: float | None
    chance_low: float
    chance_high: float
    verdict: str
    scored: int  # rows (or row pairs) the score is over
    plot: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "attack": self.attack,
            "attacker": self.attacker,
            "used": self.used,
            "score": round(self.score, 4),
            "baseline": None if self.baseline is None else round(self.baseline, 4),
            "chance_low": round(self.chance_low, 4),
            "chance_high": round(self.chance_high, 4),
            "verdict": self.verdict,
            "scored": self.scored,
        }


def job_parties(views: dict[str, PartyView]) -> tuple[PartyView, np.ndarray, list[PartyView]]:
    """A job's views as (the active party's, its binary labels, the passive parties'),
    each passive party's recorded in the active party's aligned order.

    Raises:
        ViewError: not exactly one active party, or a passive party's other row order.
        DataError: the labels are not binary.
    """
    actives = [v for v in views.values() if v.role == "active"]
    if len(actives) != 1:
        raise ViewError("a job's views need exactly one active party's")
    active = actives[0]
    passives = [v for v in views.values() if v.role == "passive"]
    for passive in passives:
        if not np.array_equal(passive.own["ids"], active.own["ids"]):
            raise ViewError(f"party '{passive.party}' recorded another aligned order")
    return active, binary_labels(active), passives


def binary_labels(active: PartyView) -> np.ndarray:
    """The active party's labels as 0/1 (the larger of two values is positive).

    Raises:
        DataError: they are not binary.
    """
    raw = active.own.get("labels")
    if raw is None:
        raise ViewError(f"party '{active.party}' recorded no labels")
    values = np.unique(raw)
    if len(values) != 2:
        raise DataError(
            f"vfl attack scores binary tasks; the label has {len(values)} values (use a "
            "binary label, e.g. one class against the rest)"
        )
    return (np.asarray(raw) == values[1]).astype(np.int8)


def verdict_auc(score: float, low: float, high: float) -> str:
    return AT_CHANCE if low <= score <= high else LEAKS


def auc_row(attack: str, who: str, used: str, scores: np.ndarray, y: np.ndarray) -> AttackRow:
    n1, n0 = int(y.sum()), int(len(y) - y.sum())
    low, high = chance_band(n1, n0)
    score = auc(scores, y)
    plot = {"scores": scores, "labels": y}
    return AttackRow(
        attack, who, used, score, None, low, high, verdict_auc(score, low, high), len(y), plot
    )


@dataclass(frozen=True)
class AttackReport:
    job: str
    protocol: str
    state: str
    rows: list[AttackRow]
    metrics: dict[str, float] = field(default_factory=dict)  # the job's last validation

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "protocol": self.protocol,
            "state": self.state,
            "attacks": [r.to_json() for r in self.rows],
            "metrics": self.metrics,
        }
