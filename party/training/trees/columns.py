"""A party's columns as its trees see them: one bin code per row and column
(`party.tables.preprocess.bins`: numeric columns as quantile bins, code 0 an empty cell;
categorical columns as their kept words, code 0 the rest and code 1 an empty cell), and
its splits (`Splits`): which of its columns, which bins go left.

A split of a numeric column sends codes 1..`threshold` left, and an empty cell left when
`missing_left`; a split of a categorical column sends the one code `threshold` left. A
party's splits are its own: its peers know each only by its index in the party's table
(the opaque split id).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from vfl.party.errors import DataError
from vfl.party.training.inputs import Inputs

CHUNK_ROWS = 8192  # rows decided at a time (a chunk's codes x splits stay small)


class BinnedColumns:
    """A party's bin codes (`codes`, rows x columns, uint8 or uint16): its numeric inputs'
    columns, then its categorical ones (`categorical` marks them)."""

    def __init__(self, inputs: Inputs) -> None:
        """Raises:
        DataError: sparse inputs (trees take the bins of a dense table)."""
        if inputs.sparse:
            raise DataError("tree models take CSV or Parquet tables (dense), not LIBSVM")
        numeric = np.asarray(inputs.x)
        cat = None if inputs.cat is None else inputs.cat.numpy()
        parts = [numeric] + ([] if cat is None else [cat])
        stacked = np.hstack(parts) if len(parts) > 1 else numeric
        top = int(stacked.max(initial=0))
        self.codes = stacked.astype(np.uint8 if top < 256 else np.uint16)
        width = numeric.shape[1]
        self.categorical = np.zeros(self.codes.shape[1], dtype=bool)
        self.categorical[width:] = True
        self.cardinalities = tuple(inputs.cardinalities)

    @property
    def width(self) -> int:
        return int(self.codes.shape[1])

    @property
    def rows(self) -> int:
        return int(self.codes.shape[0])

    def sizes(self, rows: np.ndarray) -> np.ndarray:
        """Codes per column: a numeric column's largest code among `rows` + 1, a
        categorical column's cardinality (its codes' histogram width)."""
        sizes = np.ones(self.width, dtype=np.int64)
        if len(rows) and self.width:
            sizes = self.codes[rows].max(axis=0).astype(np.int64) + 1
        cats = np.flatnonzero(self.categorical)
        for j, card in zip(cats, self.cardinalities, strict=False):
            sizes[j] = max(int(sizes[j]), card)
        return sizes


@dataclass
class Splits:
    """A party's table of splits, in the order they were made (a split's index is its id):
    the column, the threshold (numeric: the last bin going left; categorical: the code
    going left), whether an empty cell goes left, and the round that made it."""

    column: list[int] = field(default_factory=list)
    threshold: list[int] = field(default_factory=list)
    missing_left: list[bool] = field(default_factory=list)
    categorical: list[bool] = field(default_factory=list)
    round: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.column)

    def add(
        self, column: int, threshold: int, missing_left: bool, categorical: bool, rnd: int
    ) -> int:
        """Record a split; returns its id."""
        self.column.append(int(column))
        self.threshold.append(int(threshold))
        self.missing_left.append(bool(missing_left))
        self.categorical.append(bool(categorical))
        self.round.append(int(rnd))
        return len(self.column) - 1

    def keep_rounds(self, rounds: int) -> None:
        """Drop the splits of rounds after `rounds` (early stopping kept fewer); the ids
        of those kept do not change (splits are made round after round)."""
        n = sum(1 for r in self.round if r <= rounds)
        for values in self._lists():
            del values[n:]

    def _lists(self) -> Iterable[list]:
        return (self.column, self.threshold, self.missing_left, self.categorical, self.round)

    def state(self) -> dict[str, np.ndarray]:
        return {
            "column": np.asarray(self.column, dtype=np.int64),
            "threshold": np.asarray(self.threshold, dtype=np.int64),
            "missing_left": np.asarray(self.missing_left, dtype=np.bool_),
            "categorical": np.asarray(self.categorical, dtype=np.bool_),
            "round": np.asarray(self.round, dtype=np.int64),
        }

    @classmethod
    def from_state(cls, state: dict[str, np.ndarray]) -> Splits:
        return cls(
            [int(v) for v in state["column"]],
            [int(v) for v in state["threshold"]],
            [bool(v) for v in state["missing_left"]],
            [bool(v) for v in state["categorical"]],
            [int(v) for v in state["round"]],
        )

    def decide(
        self, columns: BinnedColumns, rows: np.ndarray, ids: np.ndarray | None = None
    ) -> np.ndarray:
        """Whether each of `rows` goes left at each split `ids` (None: every split):
        bool, splits x rows."""
        ids = np.arange(len(self)) if ids is None else np.asarray(ids, dtype=np.int64)
        out = np.zeros((len(ids), len(rows)), dtype=bool)
        if not len(ids) or not len(rows):
            return out
        col = np.asarray(self.column, dtype=np.int64)[ids]
        t = np.asarray(self.threshold, dtype=np.int64)[ids]
        ml = np.asarray(self.missing_left, dtype=bool)[ids]
        cat = np.asarray(self.categorical, dtype=bool)[ids]
        for lo in range(0, len(rows), CHUNK_ROWS):
            codes = columns.codes[rows[lo : lo + CHUNK_ROWS]][:, col].T
            out[:, lo : lo + CHUNK_ROWS] = goes_left(codes, t[:, None], ml[:, None], cat[:, None])
        return out

    def importance(self, gains: np.ndarray, width: int) -> dict[str, list[float]]:
        """Per column of this party: the splits' total gain and their count."""
        gain = np.zeros(width)
        count = np.zeros(width)
        col = np.asarray(self.column, dtype=np.int64)
        np.add.at(gain, col, np.asarray(gains, dtype=np.float64)[: len(col)])
        np.add.at(count, col, 1)
        return {"gain": gain.tolist(), "splits": count.tolist()}


class ColumnsOf:
    """The bin codes of the inputs a role works on (`__call__`): its training inputs'
    (`train`), and those of the inputs it scored last, kept while it scores them."""

    def __init__(self, train: Inputs) -> None:
        self.train_inputs, self.train = train, BinnedColumns(train)
        self._scored: tuple[Inputs, BinnedColumns] | None = None

    def __call__(self, inputs: Inputs) -> BinnedColumns:
        if inputs is self.train_inputs:
            return self.train
        if self._scored is None or self._scored[0] is not inputs:
            self._scored = (inputs, BinnedColumns(inputs))
        return self._scored[1]


def goes_left(codes: np.ndarray, threshold: Any, missing_left: Any, categorical: Any) -> np.ndarray:
    """Whether rows of bin `codes` in a split's column go left (numpy broadcasting: one
    split, or splits x rows against columns of the split's fields)."""
    c = np.asarray(codes, dtype=np.int64)
    numeric = ((c >= 1) & (c <= threshold)) | ((c == 0) & missing_left)
    return np.where(categorical, c == threshold, numeric)
