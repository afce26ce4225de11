"""A transcript distinguisher: can the passive party's view tell a run on the true labels
from a run of the same job on permuted labels?

Each training row gives one example per run: the row's signals (`label.passive_signals`)
in the first and in the last epoch, and their log norms. A logistic regression learns
"true run or permuted run" on half of the rows (both runs' copies of a row go to the same
half) and scores the other half; its AUC is the score. A view that carries nothing of the
labels gives the same distribution in both runs, and the AUC stays at chance; split's
derivatives differ (a model that fits true labels shrinks them, one on permuted labels
cannot), and so do the signs that follow the labels.
"""

from __future__ import annotations

import numpy as np
from vfl.attack.label import Signal, passive_signals
from vfl.attack.stats import logistic_scores
from vfl.attack.views import PartyView

TINY = 1e-300


def row_features(view: PartyView, names: list[str]) -> np.ndarray:
    """Per aligned row: the signals `names` in the first and last epoch and their log
    norms (NaN for rows never trained on)."""
    n = len(view.own["ids"])
    signals = {s.name: s for s in passive_signals(view)}
    cols = []
    for name in names:
        for epoch in sorted({1, view.epochs}):
            v = _placed(signals[name], view.rounds_of(epoch), n)
            cols += [v, np.log(np.linalg.norm(v, axis=1, keepdims=True) + TINY)]
    return np.hstack(cols)


def _placed(signal: Signal, rounds: list[int], n: int) -> np.ndarray:
    out: np.ndarray | None = None
    for rnd in rounds:
        if rnd not in signal.rounds:
            continue
        rows, values = signal.rounds[rnd]
        if out is None:
            out = np.full((n, values.shape[1]), np.nan)
        out[rows] = values
    return np.full((n, 1), np.nan) if out is None else out


def common_signals(true_view: PartyView, permuted_view: PartyView) -> list[str]:
    """The signals both runs' views hold."""
    permuted = {s.name for s in passive_signals(permuted_view)}
    return [s.name for s in passive_signals(true_view) if s.name in permuted]


def distinguish(
    true_view: PartyView, permuted_view: PartyView, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """(scores, is-true-run) of the held-out half of the rows of both runs."""
    names = common_signals(true_view, permuted_view)
    a, b = row_features(true_view, names), row_features(permuted_view, names)
    trained = np.flatnonzero(np.isfinite(a).all(axis=1) & np.isfinite(b).all(axis=1))
    order = np.random.default_rng(seed).permutation(trained)
    fit, held = order[: len(order) // 2], order[len(order) // 2 :]
    x_fit = np.vstack([a[fit], b[fit]])
    y_fit = np.concatenate([np.ones(len(fit)), np.zeros(len(fit))])
    x_new = np.vstack([a[held], b[held]])
    scores = logistic_scores(x_fit, y_fit, x_new)
    return scores, np.concatenate([np.ones(len(held)), np.zeros(len(held))])
