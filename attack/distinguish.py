"""A transcript distinguisher: can the passive party's view tell a run on the true labels
from a run of the same job on permuted labels?

Each row of each training round of the first and the last epoch gives one example per
run: the row's signals (`label.passive_signals`) in that round, and their log norms. A
logistic regression learns "true run or permuted run" on the examples of half of the
rounds (both runs' copies of a round go to the same half) and scores those of the other
half; its AUC is the score. The halves are made of rounds, not rows, because a signal
read from a ciphertext is shared by the rows it packs (3 per Paillier ciphertext, a
hundred or more per BFV one): split by rows, the held-out half would hold the very values
the fit half was fitted on, and a logistic regression on a few dozen random 64-bit values
tells the two runs apart by those values alone. For the same reason the chance band is
that of the held-out rounds, not of their rows (`stats.clustered_band`). A view that
carries nothing of the labels gives the same distribution in both runs, and the AUC stays
at chance; split's derivatives differ (a model that fits true labels shrinks them, one on
permuted labels cannot), and so do the signs that follow the labels.
"""

from __future__ import annotations

import numpy as np
from vfl.attack.label import passive_signals
from vfl.attack.stats import logistic_scores
from vfl.attack.views import PartyView

TINY = 1e-300


def round_features(view: PartyView, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per row of each training round of the first and the last epoch: the signals
    `names` in that round and their log norms; and the round of each example (rounds
    where a signal is missing are left out)."""
    signals = {s.name: s for s in passive_signals(view)}
    feats, groups = [], []
    for epoch in sorted({1, view.epochs}):
        for rnd in view.rounds_of(epoch):
            found = [signals[name].rounds.get(rnd) for name in names]
            if not found or any(f is None for f in found):
                continue
            cols = []
            for _, values in found:  # type: ignore[misc]
                cols += [values, np.log(np.linalg.norm(values, axis=1, keepdims=True) + TINY)]
            feats.append(np.hstack(cols))
            groups.append(np.full(len(feats[-1]), rnd))
    if not feats:
        return np.zeros((0, 1)), np.zeros(0, dtype=np.int64)
    return np.vstack(feats), np.concatenate(groups)


def common_signals(true_view: PartyView, permuted_view: PartyView) -> list[str]:
    """The signals both runs' views hold."""
    permuted = {s.name for s in passive_signals(permuted_view)}
    return [s.name for s in passive_signals(true_view) if s.name in permuted]


def distinguish(
    true_view: PartyView, permuted_view: PartyView, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(scores, is-true-run, round) of the examples of the held-out half of the rounds of
    both runs."""
    names = common_signals(true_view, permuted_view)
    a, rounds_a = round_features(true_view, names)
    b, rounds_b = round_features(permuted_view, names)
    keep_a, keep_b = np.isfinite(a).all(axis=1), np.isfinite(b).all(axis=1)
    shared = np.intersect1d(rounds_a[keep_a], rounds_b[keep_b])
    order = np.random.default_rng(seed).permutation(shared)
    fit = order[: len(order) // 2]
    in_a, in_b = np.isin(rounds_a, fit), np.isin(rounds_b, fit)
    fit_a, fit_b = keep_a & in_a, keep_b & in_b
    held_a, held_b = (
        keep_a & ~in_a & np.isin(rounds_a, shared),
        keep_b & ~in_b & np.isin(rounds_b, shared),
    )
    x_fit = np.vstack([a[fit_a], b[fit_b]])
    y_fit = np.concatenate([np.ones(fit_a.sum()), np.zeros(fit_b.sum())])
    x_new = np.vstack([a[held_a], b[held_b]])
    scores = logistic_scores(x_fit, y_fit, x_new)
    is_true = np.concatenate([np.ones(held_a.sum()), np.zeros(held_b.sum())])
    return scores, is_true, np.concatenate([rounds_a[held_a], rounds_b[held_b]])
