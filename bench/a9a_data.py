"""a9a made sparse and imbalanced for the accuracy benchmark: the vertical a9a split
(VFL_SHARED_DATA, default /work/shared/data; its README) with the positive rows
subsampled so that about 3% of the rows are positive, in the training and in the test
rows alike. Nothing is downloaded; the files are written at run time.

    bank (active):  a9a.guest   original features 1..50 and the label (+1 / -1)
    shop (passive): a9a.host    original features 51..123

All negative rows stay; each file keeps the positives drawn without replacement by
`rng([seed, 1])` (training) and `rng([seed, 2])` (test), in their original order, so the
same `seed` gives the same files, byte for byte. The kept lines are copied unchanged.
Used by bench/accuracy.py (`--only a9a3`) and bench/plateau.py (`--data a9a3`).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from vfl.contract.spec import TableSource

A9A = Path(os.environ.get("VFL_SHARED_DATA", "/work/shared/data")) / "a9a"
POSITIVE_RATE = 0.03
BANK_FEATURES, SHOP_FEATURES = 51, 74  # column indices as the files number them (from 0)


def _lines(name: str) -> list[str]:
    return (A9A / name).read_text().splitlines()


def _labels(guest: list[str]) -> np.ndarray:
    """0/1 labels of guest lines (`[@]id label idx:val ...`)."""
    return np.array([int(float(line.split()[1]) > 0) for line in guest])


def kept_rows(labels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Every negative row and as many positives (drawn by `rng`) as make POSITIVE_RATE of
    the rows, in their original order."""
    positives, negatives = np.flatnonzero(labels == 1), np.flatnonzero(labels == 0)
    keep = round(POSITIVE_RATE / (1 - POSITIVE_RATE) * len(negatives))
    chosen = rng.choice(positives, size=min(keep, len(positives)), replace=False)
    return np.sort(np.concatenate([negatives, chosen]))


def _subsampled(stem: str, seed: int, stream: int) -> tuple[list[str], list[str]]:
    guest, host = _lines(f"{stem}.guest"), _lines(f"{stem}.host")
    rows = kept_rows(_labels(guest), np.random.default_rng([seed, stream]))
    return [guest[i] for i in rows], [host[i] for i in rows]


def a9a3_tables(folder: Path, seed: int = 0) -> dict[str, tuple[TableSource, str]]:
    """Write the subsampled training and test files of both parties into `folder`; each
    party's training table and its test file's path."""
    train, test = _subsampled("a9a", seed, 1), _subsampled("a9a.t", seed, 2)
    tables = {}
    for i, (party, side) in enumerate((("bank", "guest"), ("shop", "host"))):
        path, test_path = folder / f"a9a3.{side}", folder / f"a9a3.t.{side}"
        path.write_text("\n".join(train[i]) + "\n")
        test_path.write_text("\n".join(test[i]) + "\n")
        label = {"label": "y"} if party == "bank" else {}
        tables[party] = (TableSource(path=str(path), format="libsvm", **label), str(test_path))
    return tables


def a9a_sampled_tables(
    folder: Path, rows: int = 28_000, positives: float = 0.22, seed: int = 0
) -> dict[str, TableSource]:
    """`rows` rows of a9a's training file with `positives` of them positive (drawn by
    `rng([seed, 3])`, in their original order), written as a9a_s.guest and a9a_s.host in
    `folder`; each party's table (bank: label y)."""
    guest, host = _lines("a9a.guest"), _lines("a9a.host")
    labels = _labels(guest)
    rng = np.random.default_rng([seed, 3])
    n_pos = round(rows * positives)
    chosen = np.concatenate(
        [
            rng.choice(np.flatnonzero(labels == 1), n_pos, replace=False),
            rng.choice(np.flatnonzero(labels == 0), rows - n_pos, replace=False),
        ]
    )
    keep = np.sort(chosen)
    tables = {}
    for party, side, lines in (("bank", "guest", guest), ("shop", "host", host)):
        path = folder / f"a9a_s.{side}"
        path.write_text("\n".join(lines[i] for i in keep) + "\n")
        label = {"label": "y"} if party == "bank" else {}
        tables[party] = TableSource(path=str(path), format="libsvm", **label)
    return tables


def _matrix(lines: list[str], width: int, skip: int) -> sp.csr_matrix:
    rows, cols = [], []
    for i, line in enumerate(lines):
        for item in line.split()[skip:]:
            rows.append(i)
            cols.append(int(item.split(":")[0]))
    data = np.ones(len(rows))
    return sp.csr_matrix((data, (rows, cols)), shape=(len(lines), width))


def a9a3_arrays(seed: int = 0) -> dict[str, tuple[sp.csr_matrix, sp.csr_matrix, np.ndarray]]:
    """{"train", "test"}: (bank features, shop features, 0/1 labels) of the subsampled
    rows, as bench/plateau.py trains on them (every value of a9a is 1)."""
    out = {}
    for name, stem, stream in (("train", "a9a", 1), ("test", "a9a.t", 2)):
        guest, host = _subsampled(stem, seed, stream)
        out[name] = (
            _matrix(guest, BANK_FEATURES, 2),
            _matrix(host, SHOP_FEATURES, 1),
            _labels(guest),
        )
    return out
