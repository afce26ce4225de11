"""Feature inference by the active party B: with k rows of a passive party's features
known (from elsewhere: a data breach, shared customers), regress X_A from what B saw of
every row and predict the other rows' X_A.

What B saw of a row: in `split`, the passive party's bottom outputs (its activation in
the first and in the last epoch) beside B's own features X_B; in `blindfl`, Z (the source
layer's output, first and last epoch) beside X_B. Z is linear in [X_A, X_B], so with
`out_dim` >= d_A and enough known rows B can invert it; that is the functionality's
output, and this attack measures how much of X_A it gives away. The baseline regresses
X_A on X_B alone: what B could infer from its own columns' correlation with A's.
Regression: ridge with its penalty chosen by generalised cross-validation (`stats`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from vfl.attack.stats import r2_per_column, ridge_predict


@dataclass(frozen=True)
class Inference:
    """R² per feature of A on the rows B did not know: from what B saw, from X_B alone."""

    k: int
    r2: np.ndarray
    baseline: np.ndarray


def infer_features(
    seen: np.ndarray, own: np.ndarray, target: np.ndarray, known: np.ndarray
) -> Inference:
    """Regress `target` (X_A, rows x d_A) on `seen` (what B saw of each row) and on `own`
    (X_B) from rows `known`; R² per feature on every other row (NaN for a feature that is
    constant in the known rows: nothing can be learnt of it from them)."""
    rest = np.setdiff1d(np.arange(len(target)), known)
    with_seen = np.hstack([seen, own])
    guess = ridge_predict(with_seen[known], target[known], with_seen[rest])
    base = ridge_predict(own[known], target[known], own[rest])
    varies = target[known].std(axis=0) > 0
    r2, r2_base = r2_per_column(target[rest], guess), r2_per_column(target[rest], base)
    return Inference(len(known), np.where(varies, r2, np.nan), np.where(varies, r2_base, np.nan))


def per_row(
    rounds: dict[int, dict[str, np.ndarray]], names: list[str], rnds: list[int], n: int
) -> np.ndarray | None:
    """The arrays `names` recorded in training rounds `rnds`, placed at their rows (n rows;
    the last round a row appears in wins), side by side; None if a round lacks them."""
    parts = []
    for name in names:
        out: np.ndarray | None = None
        for rnd in rnds:
            record = rounds[rnd]
            if name not in record:
                return None
            values = np.asarray(record[name], dtype=np.float64)
            values = values.reshape(len(values), -1)
            if out is None:
                out = np.full((n, values.shape[1]), np.nan)
            out[np.asarray(record["rows"])] = values
        if out is None:
            return None
        parts.append(out)
    return np.hstack(parts) if parts else None
