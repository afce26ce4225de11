"""The attacks on a network job's recorded views: label inference by each passive party
(norm, direction: Li et al. 2022), passive model completion (Fu et al. 2022), the
true-vs-permuted distinguisher, and feature inference by the active party. What each
party's view holds differs by protocol (`PROTOCOL_VIEWS`), not the attacks."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from vfl.attack.completion import complete
from vfl.attack.distinguish import distinguish
from vfl.attack.errors import ViewError
from vfl.attack.features import infer_features, per_row
from vfl.attack.harness import (
    AT_CHANCE,
    BY_DESIGN,
    LEAKS,
    AttackRow,
    auc_row,
    job_parties,
    verdict_auc,
)
from vfl.attack.label import label_scores, passive_signals
from vfl.attack.stats import auc, chance_band, clustered_band
from vfl.attack.views import PartyView

KNOWN_LABELS = 40  # rows whose label the passive party knows, for model completion
COMPLETION_DRAWS = 10  # draws of those rows; their AUCs are averaged
KNOWN_ROWS = 100  # rows of X_A the active party knows (and d_A + d_B)
R2_MARGIN = 0.02  # feature inference: above the baseline by more than this is a gain


@dataclass(frozen=True)
class ProtocolViews:
    """What a protocol's views hold, for the attacks' words and verdicts."""

    representation: str  # a passive party's own plaintext representation of its rows
    outputs: str  # the active party's recorded view of a passive party's outputs
    outputs_what: str  # ... in words
    gain: str  # the verdict on a feature-inference gain from them


PROTOCOL_VIEWS = {
    "split": ProtocolViews(
        "trained bottom outputs", "act_{party}", "passive bottom outputs", LEAKS
    ),
    # Z = X_A W_A + X_B W_B is the active party's by design: what it implies is not a leak
    "blindfl": ProtocolViews("X_A U_A (its plaintext share)", "z", "Z", BY_DESIGN),
}


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
        out.append(auc_row("norm", who, used, s.norm, y[s.rows]))
        ok = np.isfinite(s.direction)
        out.append(
            auc_row(
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
    what = PROTOCOL_VIEWS[protocol].representation
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
    held = PROTOCOL_VIEWS[protocol]
    names = [held.outputs.format(party=passive.party)]
    epochs = sorted({1, active.epochs})
    parts = [per_row(active.rounds, names, active.rounds_of(e), n) for e in epochs]
    if any(p is None for p in parts):
        raise ViewError(f"party '{active.party}' recorded no {names[0]} per round")
    seen = np.hstack([p for p in parts if p is not None])
    trained = np.flatnonzero(np.isfinite(seen).all(axis=1))
    target, own = passive.inputs()[trained], active.inputs()[trained]
    seen = seen[trained]
    d_a, d_b = target.shape[1], own.shape[1]
    what = held.outputs_what
    out = []
    rng = np.random.default_rng([seed, 11])
    for k in sorted({KNOWN_ROWS, d_a + d_b}):
        if k >= len(trained) // 2:
            continue
        known = rng.choice(len(trained), k, replace=False)
        inf = infer_features(seen, own, target, known)
        score, base = float(np.nanmean(inf.r2)), float(np.nanmean(inf.baseline))
        gained = score > base + R2_MARGIN
        verdict = held.gain if gained else AT_CHANCE
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
    scores, is_true, rounds = distinguish(true_view, permuted_view, seed)
    row = auc_row(
        "distinguisher",
        f"{true_view.party} (passive)",
        "its view's signals, epochs 1 + last: true vs permuted labels",
        scores,
        is_true,
    )
    low, high = clustered_band(scores, is_true, rounds, seed=seed)
    return dataclasses.replace(
        row, chance_low=low, chance_high=high, verdict=verdict_auc(row.score, low, high)
    )


def attacks(
    views: dict[str, PartyView],
    protocol: str,
    permuted: dict[str, PartyView] | None = None,
    seed: int = 0,
) -> list[AttackRow]:
    """Every attack on the views of one network job (and, for the distinguisher, of the
    same job on permuted labels)."""
    active, y, passives = job_parties(views)
    rows: list[AttackRow] = []
    for passive in passives:
        rows += label_rows(passive, y)
        completion = completion_row(passive, y, protocol, seed)
        if completion is not None:
            rows.append(completion)
        if permuted is not None and passive.party in permuted:
            rows.append(distinguisher_row(passive, permuted[passive.party], seed))
        rows += feature_rows(active, passive, protocol, seed)
    return rows
