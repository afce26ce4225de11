"""The binary task's metrics against scikit-learn and scipy: AUC, Gini (2 AUC - 1) and KS
(the largest gap between the positive and negative rows' score distributions), ties and
one-class rows included."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import ks_2samp
from vfl.party.training.metrics import binary_metrics, split_metrics

sklearn_metrics = pytest.importorskip("sklearn.metrics", reason="scikit-learn is a test extra")


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("ties", [False, True])
def test_auc_gini_and_ks_equal_scikit_learn_and_scipy(seed: int, ties: bool) -> None:
    rng = np.random.default_rng(seed)
    labels = (rng.random(997) < 0.3).astype(float)
    logits = rng.normal(size=997) + labels
    if ties:
        logits = np.round(logits, 1)  # many equal scores
    m = binary_metrics(labels, logits)
    auc = sklearn_metrics.roc_auc_score(labels, logits)
    assert m["auc"] == pytest.approx(auc, abs=1e-12)
    assert m["gini"] == pytest.approx(2 * auc - 1, abs=1e-12)
    expected_ks = ks_2samp(logits[labels == 1], logits[labels == 0]).statistic
    assert m["ks"] == pytest.approx(expected_ks, abs=1e-12)


def test_rows_of_one_class_leave_auc_gini_and_ks_undefined_with_why() -> None:
    m = binary_metrics(np.zeros(10), np.linspace(-1, 1, 10))
    assert all(math.isnan(m[k]) for k in ("auc", "gini", "ks"))
    _, undefined = split_metrics(m)
    assert "one class only" in undefined["ks"] and "one class only" in undefined["gini"]
