"""The risk team's tables of a binary model's scores: KS, Gini and AUC against
scikit-learn and scipy, and the lift and calibration tables against a computation of
their own (each row's band from the rank of the first row of its run of ties), ties,
tables of fewer than ten rows and rows in any order included."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import ks_2samp
from vfl.party.training.evaluation import evaluate

sklearn_metrics = pytest.importorskip("sklearn.metrics", reason="scikit-learn is a test extra")


def expected_bands(labels: np.ndarray, scores: np.ndarray) -> dict[int, dict[str, float]]:
    """Per band: rows, events, mean score, lowest and highest score, computed row by row:
    a row's band is the nominal band (ranks floor((k-1) n / 10) .. floor(k n / 10) - 1,
    highest score first) of the first rank its score holds."""
    n = len(scores)
    bands: dict[int, list[int]] = {}
    for i, s in enumerate(scores):
        first = int(np.sum(scores > s))  # rows ranked above every row of this score
        k = next(k for k in range(1, 11) if first < (k * n) // 10)
        bands.setdefault(k, []).append(i)
    return {
        k: {
            "rows": len(rows),
            "events": float(labels[rows].sum()),
            "mean": float(np.mean(scores[rows])),
            "min": float(scores[rows].min()),
            "max": float(scores[rows].max()),
        }
        for k, rows in sorted(bands.items())
    }


@pytest.mark.parametrize(("rows", "digits"), [(997, None), (1000, 2), (503, 1), (7, None), (40, 0)])
def test_tables_equal_an_independent_computation(rows: int, digits: int | None) -> None:
    # Prepare: probabilities, rounded to make runs of ties (digits 0: two values only)
    rng = np.random.default_rng(rows)
    labels = (rng.random(rows) < 0.3).astype(float)
    labels[:2] = [0.0, 1.0]
    scores = 1 / (1 + np.exp(-(rng.normal(size=rows) + labels)))
    if digits is not None:
        scores = np.round(scores, digits)
    # Execute
    ev = evaluate(labels, scores)
    # Assert: KS, Gini and AUC as scikit-learn and scipy have them
    assert ev is not None and ev.rows == rows and ev.events == labels.sum()
    auc = sklearn_metrics.roc_auc_score(labels, scores)
    assert ev.auc == pytest.approx(auc, abs=1e-12)
    assert ev.gini == pytest.approx(2 * auc - 1, abs=1e-12)
    ks = ks_2samp(scores[labels == 1], scores[labels == 0]).statistic
    assert ev.ks == pytest.approx(ks, abs=1e-12)
    # the bands, row by row
    want = expected_bands(labels, scores)
    assert [b.band for b in ev.lift] == list(want) == [c.band for c in ev.calibration]
    assert sum(b.rows for b in ev.lift) == rows
    rate, seen = labels.mean(), 0.0
    for lift, cal in zip(ev.lift, ev.calibration, strict=True):
        w = want[lift.band]
        seen += w["events"]
        assert (lift.rows, lift.events) == (w["rows"], w["events"]) == (cal.rows, lift.events)
        assert lift.event_rate == pytest.approx(w["events"] / w["rows"], abs=1e-12)
        assert cal.event_rate == lift.event_rate
        assert lift.lift == pytest.approx(w["events"] / w["rows"] / rate, abs=1e-12)
        assert lift.cumulative_events_share == pytest.approx(seen / labels.sum(), abs=1e-12)
        assert (lift.min_score, lift.max_score) == (w["min"], w["max"])
        assert cal.mean_predicted == pytest.approx(w["mean"], abs=1e-12)
    assert ev.lift[-1].cumulative_events_share == pytest.approx(1.0, abs=1e-12)


def test_ten_bands_of_equal_rows_without_ties_and_the_same_tables_in_any_row_order() -> None:
    rng = np.random.default_rng(3)
    labels = (rng.random(1000) < 0.2).astype(float)
    scores = np.round(rng.random(1000), 2)  # ties
    ev = evaluate(labels, scores)
    order = rng.permutation(1000)
    assert evaluate(labels[order], scores[order]) == ev
    distinct = rng.permutation(1000) / 1000.0
    plain = evaluate(labels, distinct)
    assert plain is not None and [b.rows for b in plain.lift] == [100] * 10
    assert [b.band for b in plain.lift] == list(range(1, 11))


def test_rows_of_one_class_have_no_evaluation() -> None:
    assert evaluate(np.zeros(20), np.linspace(0, 1, 20)) is None
    assert evaluate(np.ones(20), np.linspace(0, 1, 20)) is None
    assert evaluate(np.zeros(0), np.zeros(0)) is None
