"""The harness of `vfl attack`: hands each attack its attacker's view (and only the labels
or rows the threat model lets that attacker know), then scores what the attack inferred
against the truth, after the fact. The truth (the active party's labels, the passive
parties' features) is read from the parties' own recorded views by the harness alone.

One `AttackRow` per attack, attacker and signal: its score, a baseline where there is
one, the band a view that carries nothing lands in, and the verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from vfl.attack.completion import complete
from vfl.attack.distinguish import distinguish
from vfl.attack.errors import DataError, ViewError
from vfl.attack.features import infer_features, per_row
from vfl.attack.label import label_scores, passive_signals
from vfl.attack.stats import auc, chance_band
from vfl.attack.views import PartyView

KNOWN_LABELS = 40  # rows whose label the passive party knows, for model completion
COMPLETION_DRAWS = 10  # draws of those rows; their AUCs are averaged
KNOWN_ROWS = 100  # rows of X_A the active party knows (and d_A + d_B)
R2_MARGIN = 0.02  # feature inference: above the baseline by more than this is a gain

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


def _verdict_auc(score: float, low: float, high: float) -> str:
    return AT_CHANCE if low <= score <= high else LEAKS


def _auc_row(attack: str, who: str, used: str, scores: np.ndarray, y: np.ndarray) -> AttackRow:
    n1, n0 = int(y.sum()), int(len(y) - y.sum())
    low, high = chance_band(n1, n0)
    score = auc(scores, y)
    plot = {"scores": scores, "labels": y}
    return AttackRow(
        attack, who, used, score, None, low, high, _verdict_auc(score, low, high), len(y), plot
    )


def label_rows(passive: PartyView, y: np.ndarray) -> list[AttackRow]:
    """Norm and direction AUCs for every signal of the passive party's view, pooled over
    epoch 1 and the last epoch; one known positive per batch (the first one)."""
    rounds = passive.rounds_of(1) + (
        passive.rounds_of(passive.epochs) if passive.epochs > 1 else []
    )
    known = {}
    for rnd in rounds:
        batch = np.asarray(passive.rounds[rnd]["rows"])
        positives = np.flatnonzero(y[batch] == 1)
        if len(positives):
            known[rnd] = int(positives[0])
    who = f"{passive.party} (passive)"
    out = []
    for signal in passive_signals(passive):
        s = label_scores(signal, rounds, known)
        if not len(s.rows):
            continue
        epochs = "epoch 1" + (" + last" if passive.epochs > 1 else "")
        used = f"{signal.name}, {epochs}"
        out.append(_auc_row("norm", who, used, s.norm, y[s.rows]))
        ok = np.isfinite(s.direction)
        out.append(
            _auc_row(
                "direction", who, f"{used}, 1 known positive/batch", s.direction[ok], y[s.rows][ok]
            )
        )
    return out


def completion_row(passive: PartyView, y: np.ndarray, protocol: str, seed: int) -> AttackRow | None:
    """Model completion with KNOWN_LABELS labels (half positive), averaged over draws;
    None for a party with no plaintext representation (blindfl, categorical fields only)."""
    rep = passive.final.get("representation")
    if rep is None:
        return None
    train = np.asarray(passive.own["train_rows"])
    rng = np.random.default_rng([seed, 7])
    learnt, raw, n1, n0 = [], [], 0, 0
    for _ in range(COMPLETION_DRAWS):
        pos = rng.choice(train[y[train] == 1], KNOWN_LABELS // 2, replace=False)
        neg = rng.choice(train[y[train] == 0], KNOWN_LABELS - len(pos), replace=False)
        known = np.concatenate([pos, neg])
        c = complete(rep, passive.inputs(), known, y[known])
        learnt.append(auc(c.learnt, y[c.scored]))
        raw.append(auc(c.raw, y[c.scored]))
        n1, n0 = int(y[c.scored].sum()), int(len(c.scored) - y[c.scored].sum())
    score, base = float(np.mean(learnt)), float(np.mean(raw))
    low, high = chance_band(n1, n0, centre=base)
    what = "trained bottom outputs" if protocol == "split" else "X_A U_A (its plaintext share)"
    used = f"{what} + {KNOWN_LABELS} known labels, vs raw X_A ({COMPLETION_DRAWS} draws)"
    verdict = LEAKS if score > high else AT_CHANCE
    return AttackRow(
        "model_completion",
        f"{passive.party} (passive)",
        used,
        score,
        base,
        low,
        high,
        verdict,
        n1 + n0,
    )


def feature_rows(
    active: PartyView, passive: PartyView, protocol: str, seed: int
) -> list[AttackRow]:
    """Feature inference of the passive party's X_A by the active party, k = KNOWN_ROWS
    and k = d_A + d_B known rows."""
    n = len(active.own["ids"])
    names = [f"act_{passive.party}"] if protocol == "split" else ["z"]
    epochs = sorted({1, active.epochs})
    parts = [per_row(active.rounds, names, active.rounds_of(e), n) for e in epochs]
    if any(p is None for p in parts):
        raise ViewError(f"party '{active.party}' recorded no {names[0]} per round")
    seen = np.hstack([p for p in parts if p is not None])
    trained = np.flatnonzero(np.isfinite(seen).all(axis=1))
    target, own = passive.inputs()[trained], active.inputs()[trained]
    seen = seen[trained]
    d_a, d_b = target.shape[1], own.shape[1]
    what = "passive bottom outputs" if protocol == "split" else "Z"
    out = []
    rng = np.random.default_rng([seed, 11])
    for k in sorted({KNOWN_ROWS, d_a + d_b}):
        if k >= len(trained) // 2:
            continue
        known = rng.choice(len(trained), k, replace=False)
        inf = infer_features(seen, own, target, known)
        score, base = float(np.nanmean(inf.r2)), float(np.nanmean(inf.baseline))
        gained = score > base + R2_MARGIN
        verdict = (BY_DESIGN if protocol == "blindfl" else LEAKS) if gained else AT_CHANCE
        learnable = int(np.isfinite(inf.r2).sum())
        used = (
            f"{what} (epochs {'+'.join(map(str, epochs))}) + X_B, k={k} known rows of X_A "
            f"(mean over the {learnable} of {d_a} features that vary in them)"
        )
        plot = {"r2": inf.r2, "baseline_r2": inf.baseline}
        out.append(
            AttackRow(
                "feature_inference",
                f"{active.party} (active)",
                used,
                score,
                base,
                base - R2_MARGIN,
                base + R2_MARGIN,
                verdict,
                len(trained) - k,
                plot,
            )
        )
    return out


def distinguisher_row(true_view: PartyView, permuted_view: PartyView, seed: int) -> AttackRow:
    scores, is_true = distinguish(true_view, permuted_view, seed)
    row = _auc_row(
        "distinguisher",
        f"{true_view.party} (passive)",
        "its view's signals, epochs 1 + last: true vs permuted labels",
        scores,
        is_true,
    )
    return row


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


def evaluate(
    views: dict[str, PartyView],
    protocol: str,
    permuted: dict[str, PartyView] | None = None,
    seed: int = 0,
) -> list[AttackRow]:
    """Every attack on the views of one job (and, for the distinguisher, of the same job
    on permuted labels)."""
    actives = [v for v in views.values() if v.role == "active"]
    if len(actives) != 1:
        raise ViewError("a job's views need exactly one active party's")
    active = actives[0]
    y = binary_labels(active)
    rows: list[AttackRow] = []
    for passive in (v for v in views.values() if v.role == "passive"):
        if not np.array_equal(passive.own["ids"], active.own["ids"]):
            raise ViewError(f"party '{passive.party}' recorded another aligned order")
        rows += label_rows(passive, y)
        completion = completion_row(passive, y, protocol, seed)
        if completion is not None:
            rows.append(completion)
        if permuted is not None and passive.party in permuted:
            rows.append(distinguisher_row(passive, permuted[passive.party], seed))
        rows += feature_rows(active, passive, protocol, seed)
    return rows
