"""A party's tables in memory: `RawTable` (a dataset's rows before preprocessing, its
`RawColumn`s by name, or a CSR matrix of LIBSVM columns) and `Table` (the model's inputs:
ids, a float32 feature matrix, dense or CSR, the labels, the categorical codes), and
`with_columns`, a table given the feature columns of another (a test table or rows to
score, those of the training table).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TypeAlias

import numpy as np
import scipy.sparse as sp
from vfl.party.errors import DataError
from vfl.party.tables.reader.columns import row_place

Features: TypeAlias = np.ndarray | sp.csr_matrix


@dataclass(frozen=True)
class Table:
    """A dataset's rows as the model's inputs (what `Preprocessor.apply` gives)."""

    ids: np.ndarray  # numpy strings (`party.tables.reader.buffers.IDS`)
    features: Features  # float32, (rows, d): dense (CSV) or CSR (LIBSVM)
    labels: np.ndarray | None  # float64, (rows,)
    feature_names: tuple[str, ...]
    categorical: np.ndarray | None = None  # int64, (rows, fields)
    cardinalities: tuple[int, ...] = ()  # per categorical field: max code + 1

    @property
    def rows(self) -> int:
        return len(self.ids)


@dataclass(frozen=True)
class RawColumn:
    """One column of a table before preprocessing: numeric (`values`, float32, NaN where
    a cell is empty), text (`codes` into `words`, -1 where empty) or ignored. `lines`:
    the table is a CSV file (to say where row r is in errors: line r + 2, else row r + 1)."""

    name: str
    values: np.ndarray | None = None
    codes: np.ndarray | None = None
    words: tuple[str, ...] | None = None
    ignored: bool = False
    lines: bool = True
    dataset: str = ""  # the dataset's name, for errors

    def integer_codes(self) -> np.ndarray:
        """The cells of a text column as integer codes (preprocess: none).

        Raises:
            DataError: a cell that is not an integer code (names the value and its line).
        """
        assert self.codes is not None and self.words is not None
        lookup = np.empty(len(self.words), dtype=np.int64)
        for i, word in enumerate(self.words):
            try:
                lookup[i] = _code(word)
            except ValueError:
                row = int(np.argmax(self.codes == i))
                raise DataError(
                    f"dataset '{self.dataset}': categorical column '{self.name}' has {word!r} "
                    f"at {self.where_row(row)}; categorical values must be integer codes "
                    "(hash or label-encode them)",
                    public=f"dataset '{self.dataset}': a categorical column holds a value "
                    "that is not an integer code",
                ) from None
        if np.any(self.codes < 0):
            row = int(np.argmax(self.codes < 0))
            raise DataError(
                f"dataset '{self.dataset}': categorical column '{self.name}' has '' at "
                f"{self.where_row(row)}; categorical values must be integer codes (fill "
                "the cell)",
                public=f"dataset '{self.dataset}': a categorical column has an empty cell",
            )
        return lookup[self.codes] if len(lookup) else np.zeros(len(self.codes), np.int64)

    def where_row(self, row: int) -> str:
        return row_place(row, self.lines)

    def first_word(self) -> tuple[str, str]:
        """(the first present cell that is not a number, where it is)."""
        if self.codes is None or self.words is None:
            return "", "?"
        for row in np.flatnonzero(self.codes >= 0):
            word = self.words[self.codes[row]]
            try:
                float(word)
            except ValueError:
                return word, self.where_row(int(row))
        return "", "?"


def _code(word: str) -> int:
    """An integer code written as text ("3", " 3", "3.0")."""
    try:
        return int(word)
    except ValueError:
        number = float(word)
        if not number.is_integer():
            raise
        return int(number)


class RawTable:
    """A dataset's rows before preprocessing: ids, labels (if any) and either its typed
    columns (CSV, Parquet) or a CSR matrix of its LIBSVM columns (`sparse`). A job frees
    each column once preprocessed (`release`). Columns are found by name in constant
    time: a table may have tens of thousands."""

    def __init__(
        self,
        name: str,
        ids: np.ndarray,  # numpy strings (`party.tables.reader.buffers.IDS`)
        labels: np.ndarray | None,  # float64
        columns: Sequence[RawColumn],
        sparse: sp.csr_matrix | None = None,
        sparse_names: tuple[str, ...] = (),
    ) -> None:
        self.name, self.ids, self.labels = name, ids, labels
        self.sparse, self.sparse_names = sparse, sparse_names
        self._columns = {c.name: c for c in columns}  # in the table's order

    @property
    def columns(self) -> tuple[RawColumn, ...]:
        """The columns not released, in the table's order."""
        return tuple(self._columns.values())

    @property
    def rows(self) -> int:
        return len(self.ids)

    def release(self, name: str) -> None:
        """Drop column `name` (its buffer is freed once nothing else holds it)."""
        self._columns.pop(name, None)

    def column(self, name: str) -> RawColumn:
        """Raises:
        KeyError: no such column (or it was released)."""
        return self._columns[name]

    def sparse_table(self, rows: np.ndarray | None = None) -> Table:
        """The LIBSVM rows (`rows` of them, in that order; None: every row) as a `Table`."""
        assert self.sparse is not None
        if rows is None:
            return Table(self.ids, self.sparse, self.labels, self.sparse_names)
        labels = None if self.labels is None else self.labels[rows]
        return Table(self.ids[rows], self.sparse[rows], labels, self.sparse_names)


def with_columns(table: Table, names: tuple[str, ...], what: str) -> Table:
    """`table` with the feature columns `names`, in that order (`what` names the table in
    errors). A LIBSVM (sparse) table gets zeros for columns it lacks and drops columns not
    in `names` (a model has no weight for a column that never occurred in training); a
    CSV table must have exactly these columns.

    Raises:
        DataError: a dense table with other columns, or a sparse one that shares none.
    """
    if table.feature_names == names:
        return table
    x = table.features
    where = {n: j for j, n in enumerate(names)}
    to = np.array([where.get(n, -1) for n in table.feature_names], dtype=np.int64)
    if isinstance(x, np.ndarray) or (len(to) and not np.any(to >= 0)):
        raise DataError(
            f"{what}: its feature columns {_names(table.feature_names)} differ from the "
            f"training columns {_names(names)} (names, order and count must match; LIBSVM "
            "files must share column indices); give it the training columns",
            public=f"{what}: its feature columns differ from the training columns (names, "
            "order or count); the party must give it the training columns",
        )
    coo = x.tocoo()
    keep = to[coo.col] >= 0
    cols = sp.csr_matrix(
        (coo.data[keep], (coo.row[keep], to[coo.col[keep]])),
        shape=(table.rows, len(names)),
        dtype=np.float32,
    )
    return replace(table, features=cols, feature_names=names)


def _names(names: tuple[str, ...]) -> str:
    shown = ", ".join(names[:8])
    return f"[{shown}{', ...' if len(names) > 8 else ''}] ({len(names)})"
