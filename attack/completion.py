"""Passive model completion (Fu et al., "Label Inference Attacks Against Vertical
Federated Learning", USENIX Security 2022), reimplemented from the paper's description.

The passive party knows the labels of a few rows (40 here, half of each class) and fits
a small head (an L2 logistic regression) on top of its own trained bottom model's outputs,
the representation it learnt in the federation; it then scores every other row. The same
head fitted on its raw features is the baseline: what it could infer without the
federation. The gain of the first over the second is what training leaked into its model.

In `split` the representation is the party's trained bottom model. In `blindfl` the
party's only plaintext weights are U_A, fixed at setup (V_A is encrypted under B's key),
so its representation is X_A U_A: whatever it gains is not learnt from labels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from vfl.attack.stats import logistic_scores


@dataclass(frozen=True)
class Completion:
    """The head's logits on the scored rows, on the representation and on raw features."""

    scored: np.ndarray  # row positions
    learnt: np.ndarray
    raw: np.ndarray


def complete(
    representation: np.ndarray, raw: np.ndarray, known: np.ndarray, known_labels: np.ndarray
) -> Completion:
    """Fit the head on rows `known` (0/1 `known_labels`) of `representation` and of `raw`
    (both rows x columns, one row per aligned row); score every other row."""
    scored = np.setdiff1d(np.arange(len(raw)), known)
    rep = np.asarray(representation, dtype=np.float64)
    learnt = logistic_scores(rep[known], known_labels, rep[scored])
    base = logistic_scores(raw[known], known_labels, raw[scored])
    return Completion(scored, learnt, base)
