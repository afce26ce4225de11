"""The candidate splits of one node at one party, from its own bin counts there.

A party's histogram of a node holds one bucket per (column, code): `Layout` lays its
columns' codes end to end. From the node's row count per bucket (the party knows which
rows are in the node, and its own codes), it offers each split that sends rows both ways,
once per distinct partition of the node's rows:

- numeric column: codes 1..t left, for each t whose bin holds rows of the node and with
  rows in a bin above it (the smallest t of each run of thresholds that split the node's
  rows alike); when the node has empty cells in the column, each such t twice (the empty
  cells left, and right) and the split of the empty cells from the rest; when it has none,
  empty cells at scoring go to the side with more of the node's rows;
- categorical column: each code that holds some but not all of the node's rows, alone
  on the left (one against the rest).

What crosses to the active party is each candidate's left-side sums of (g, h), and the
candidates' order is shuffled with a key only this party holds (`Candidates.shuffled`),
so a candidate's index (its opaque id for the node) says nothing of its column or
threshold. The sums are `select`ed from the node's histogram: a numeric candidate's are
the bucket sums of codes 1..t (a difference of running sums) plus, with empty cells left,
code 0's; a categorical candidate's are its code's bucket.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Layout:
    """Where each column's codes sit in a histogram: column j's code c is bucket
    `offsets[j] + c`; `categorical` marks the categorical columns."""

    offsets: np.ndarray  # int64, columns + 1 (the last: the number of buckets)
    categorical: np.ndarray  # bool, columns
    grid: np.ndarray  # int64, columns x codes: each code's bucket, -1 beyond a column's

    @classmethod
    def of(cls, sizes: np.ndarray, categorical: np.ndarray) -> Layout:
        sizes = np.asarray(sizes, dtype=np.int64)
        offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        codes = np.arange(int(sizes.max(initial=1)))
        grid = np.where(codes < sizes[:, None], offsets[:-1, None] + codes, -1)
        return cls(offsets, np.asarray(categorical, dtype=bool), grid)

    @property
    def buckets(self) -> int:
        return int(self.offsets[-1])

    def padded(self, counts: np.ndarray) -> np.ndarray:
        """Per-bucket `counts` as columns x codes (0 beyond a column's codes)."""
        return np.where(self.grid >= 0, counts[np.maximum(self.grid, 0)], 0)


@dataclass(frozen=True)
class Candidates:
    """A node's candidate splits at one party, in the order their sums are sent:
    each one's column, threshold, whether empty cells go left, and whether it is
    categorical; `first` and `last` are the buckets whose sums it takes (numeric: codes
    1..t, buckets first+1..last, plus bucket `first` when `missing_left`; categorical:
    bucket `last` alone)."""

    column: np.ndarray
    threshold: np.ndarray
    missing_left: np.ndarray
    categorical: np.ndarray
    first: np.ndarray
    last: np.ndarray

    def __len__(self) -> int:
        return len(self.column)

    def shuffled(self, rng: np.random.Generator) -> Candidates:
        order = rng.permutation(len(self))
        return Candidates(*(getattr(self, f)[order] for f in _FIELDS))

    def left_sums(self, hist: np.ndarray) -> np.ndarray:
        """Each candidate's left-side sums from a node's plaintext histogram (buckets x
        k): what `Histograms.select` computes, in the clear."""
        running = np.zeros((len(hist) + 1, hist.shape[1]))
        np.cumsum(hist, axis=0, out=running[1:])
        numeric = running[self.last + 1] - running[self.first + 1]
        numeric += np.where(self.missing_left[:, None], hist[self.first], 0.0)
        return np.where(self.categorical[:, None], hist[self.last], numeric)


_FIELDS = ("column", "threshold", "missing_left", "categorical", "first", "last")


def candidates(counts: np.ndarray, layout: Layout) -> Candidates:
    """The candidate splits of a node with `counts` rows per bucket (`layout`)."""
    grid = layout.padded(counts)  # columns x codes, 0 beyond a column's codes
    numeric = ~layout.categorical
    missing, present = grid[:, 0], grid[:, 1:]
    total = present.sum(axis=1)
    below = np.cumsum(present, axis=1)  # rows with codes 1..t, t = 1..
    j, t = np.nonzero((present > 0) & (below < total[:, None]) & numeric[:, None])
    left, t = below[j, t], t + 1
    empty = missing[j] > 0
    # no empty cell here: at scoring they follow the node's larger side
    larger = np.where(empty, True, left >= total[j] - left)
    alone = np.flatnonzero(numeric & (missing > 0) & (total > 0))  # empty cells alone left
    cj, code = np.nonzero((grid > 0) & (grid < grid.sum(axis=1)[:, None]) & ~numeric[:, None])
    column = np.concatenate([j, j[empty], alone, cj])
    threshold = np.concatenate([t, t[empty], np.zeros(len(alone), np.int64), code])
    missing_left = np.concatenate(
        [
            larger,
            np.zeros(int(empty.sum()), bool),
            np.ones(len(alone), bool),
            np.zeros(len(cj), bool),
        ]
    )
    categorical = np.concatenate([np.zeros(len(column) - len(cj), bool), np.ones(len(cj), bool)])
    first = layout.offsets[column]
    return Candidates(
        column.astype(np.int64),
        threshold.astype(np.int64),
        missing_left.astype(bool),
        categorical,
        first,
        first + threshold,
    )
