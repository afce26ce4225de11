"""The statistics the attacks are scored with: AUC and its null band, ridge, R², the
logistic head; and the label permutation of the distinguisher's second run."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from vfl.attack.data import permuted_labels
from vfl.attack.errors import AttackError
from vfl.attack.stats import (
    auc,
    auc_se,
    chance_band,
    logistic_scores,
    r2_per_column,
    ridge_predict,
)
from vfl.contract.spec import TableSource


def test_auc_counts_pairs_and_ties() -> None:
    assert auc(np.array([0.1, 0.4, 0.35, 0.8]), np.array([0, 0, 1, 1])) == 0.75
    assert auc(np.array([1.0, 1.0]), np.array([0, 1])) == 0.5
    assert auc(np.array([3.0, 2.0, 1.0]), np.array([1, 0, 0])) == 1.0
    with pytest.raises(AttackError, match="both classes"):
        auc(np.array([1.0, 2.0]), np.array([1, 1]))


def test_the_null_band_matches_random_scores() -> None:
    n1, n0 = 1000, 4000
    assert auc_se(n1, n0) == pytest.approx(math.sqrt((n1 + n0 + 1) / (12 * n1 * n0)))
    low, high = chance_band(n1, n0)
    assert high - 0.5 == pytest.approx(max(0.02, 4 * auc_se(n1, n0)))
    rng = np.random.default_rng(0)
    y = np.r_[np.ones(n1), np.zeros(n0)]
    draws = [auc(rng.normal(size=n1 + n0), y) for _ in range(200)]
    assert np.std(draws) == pytest.approx(auc_se(n1, n0), rel=0.15)
    assert all(low <= d <= high for d in draws)


def test_ridge_recovers_a_linear_map_and_r2_scores_it() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(400, 5))
    y = x @ rng.normal(size=(5, 3)) + 0.01 * rng.normal(size=(400, 3))
    r2 = r2_per_column(y[200:], ridge_predict(x[:200], y[:200], x[200:]))
    assert np.all(r2 > 0.99)
    noise = rng.normal(size=(400, 2))
    r2 = r2_per_column(noise[200:], ridge_predict(x[:200], noise[:200], x[200:]))
    assert np.all(r2 < 0.05)
    assert np.allclose(ridge_predict(x[:10, :0], y[:10], x[10:20, :0]), y[:10].mean(axis=0))


def test_the_logistic_head_separates_what_is_separable() -> None:
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2000, 4))
    y = (x[:, 0] + 0.3 * rng.normal(size=2000) > 0).astype(int)
    scores = logistic_scores(x[:40], y[:40], x[40:])
    assert auc(scores, y[40:]) > 0.9


def _csv(path: Path) -> list[list[str]]:
    return [line.replace('"', "").split(",") for line in path.read_text().splitlines()]


def test_permuted_labels_keep_ids_and_features(tmp_path: Path) -> None:
    src = tmp_path / "bank.csv"
    src.write_text("id,y,a\n" + "".join(f"{i},{i % 2},{i * 0.5}\n" for i in range(50)))
    out = permuted_labels(TableSource(path=str(src), label="y"), tmp_path / "p")
    before, after = _csv(src), _csv(Path(out.path))
    assert [r[0] for r in after] == [r[0] for r in before]
    assert [float(r[2]) for r in after[1:]] == [float(r[2]) for r in before[1:]]
    labels_before, labels_after = [r[1] for r in before[1:]], [r[1] for r in after[1:]]
    assert sorted(labels_after) == sorted(labels_before) and labels_after != labels_before

    svm = tmp_path / "a.guest"
    svm.write_text("".join(f"@{i} {1 if i % 3 else -1} 1:1.0 {i % 5 + 2}:1.0\n" for i in range(30)))
    out = permuted_labels(TableSource(path=str(svm), format="libsvm", label="y"), tmp_path / "p")
    before = [line.split() for line in svm.read_text().splitlines()]
    after = [line.split() for line in Path(out.path).read_text().splitlines()]
    assert [b[:1] + b[2:] for b in before] == [a[:1] + a[2:] for a in after]
    assert sorted(a[1] for a in after) == sorted(b[1] for b in before)
    assert [a[1] for a in after] != [b[1] for b in before]
