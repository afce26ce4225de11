"""Synthetic sparse, imbalanced data for the accuracy benchmark: a LIBSVM-like table of
300 binary features with about 3% positives, split vertically, written as LIBSVM at run
time (nothing is downloaded).

    bank (active):  @id label f1..f150     150 binary features and the label
    shop (passive): @id f1..f150           150 more binary features of the same people

Feature j occurs with a frequency drawn log-uniformly from [0.002, 0.2] (most are rare,
as in one-hot and hashed tables); the label comes from a sparse logistic model (a third
of the features carry a weight, N(0, 1.5^2)) whose intercept is set so that about 3% of
the rows are positive. Both parties hold informative features. The same `rows` and
`seed` give the same files, byte for byte. Used by bench/accuracy.py and the blindfl
accuracy tests.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from vfl.contract.spec import TableSource

FEATURES, BANK_FEATURES = 300, 150
POSITIVE_RATE = 0.03


def sparse_arrays(rows: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bank features, shop features, labels): binary float matrices and 0/1 labels."""
    rng = np.random.default_rng(seed)
    freq = np.exp(rng.uniform(np.log(0.002), np.log(0.2), size=FEATURES))
    freq[[BANK_FEATURES - 1, FEATURES - 1]] = 0.2  # each party's last column occurs
    x = (rng.random((rows, FEATURES)) < freq).astype(np.float64)
    w = rng.normal(0.0, 1.5, size=FEATURES) * (rng.random(FEATURES) < 1 / 3)
    score = x @ w
    low, high = -30.0, 30.0
    for _ in range(60):  # the intercept that gives POSITIVE_RATE positives on average
        mid = (low + high) / 2
        rate = float(np.mean(1 / (1 + np.exp(-(score + mid)))))
        low, high = (mid, high) if rate < POSITIVE_RATE else (low, mid)
    y = (rng.random(rows) < 1 / (1 + np.exp(-(score + low)))).astype(int)
    return x[:, :BANK_FEATURES], x[:, BANK_FEATURES:], y


def sparse_tables(folder: Path, rows: int = 20_000, seed: int = 0) -> dict[str, TableSource]:
    """Write bank.svm and shop.svm (LIBSVM, `@id` first) into `folder`; return each
    party's table."""
    xa, xb, y = sparse_arrays(rows, seed)
    bank, shop = folder / "bank.svm", folder / "shop.svm"
    _write(bank, xa, y)
    _write(shop, xb, None)
    return {
        "bank": TableSource(path=str(bank), format="libsvm", label="y"),
        "shop": TableSource(path=str(shop), format="libsvm"),
    }


def _write(path: Path, x: np.ndarray, y: np.ndarray | None) -> None:
    lines = []
    for i, row in enumerate(x):
        label = [] if y is None else [str(int(y[i]))]
        cols = [f"{j + 1}:1" for j in np.flatnonzero(row)]
        lines.append(" ".join([f"@{i}", *label, *cols]))
    path.write_text("\n".join(lines) + "\n")
