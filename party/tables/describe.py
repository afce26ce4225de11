"""What a party would be fitted on: a summary of each column of one of its datasets, or of
a LIBSVM dataset as a whole.

`describe_dataset` reads a dataset through the typed table reader (`party.tables.reader.whole`) and
gives, per column, its type as preprocessing would take it (id, label, numeric,
categorical: words or a column set so, ignore: set so, or empty), the share of
missing cells (empty, or NaN), the exact number of distinct present values and, for
numbers, min / median / max. `describe_libsvm` summarises a LIBSVM dataset (its columns
may be millions of hashed indices): rows, the feature indices that occur, nonzeros a row,
the range of the values and the rows of each label value. It runs at the party on its own
data (`vfl data describe`) and sends nothing anywhere; a sql dataset's query is run
(read-only) into a temporary Parquet file, removed once read.
"""

from __future__ import annotations

import tempfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from vfl.contract.spec import TableSource
from vfl.party.tables.libsvm import read_libsvm
from vfl.party.tables.reader.columns import ReadTable
from vfl.party.tables.reader.files import existing, not_utf8
from vfl.party.tables.reader.whole import read_table
from vfl.party.tables.sql import as_parquet, write_parquet


@dataclass(frozen=True)
class ColumnSummary:
    """One column: its name, type, missing share, distinct values and numeric range."""

    name: str
    type: str  # id | label | numeric | categorical | ignore | empty
    missing: float  # share of rows, 0..1
    distinct: int  # present values
    min: float | None = None
    median: float | None = None
    max: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


MAX_LABELS = 20  # label values counted one by one; more: a regression's


@dataclass(frozen=True)
class SparseSummary:
    """A LIBSVM dataset: its rows, the feature indices that occur (how many, the first and
    the last), its nonzeros (in all; min / median / max a row), the range of their values,
    and its label's values (rows per value, when at most `MAX_LABELS`; else the range)."""

    rows: int
    features: int
    first_index: int | None
    last_index: int | None
    nonzeros: int
    per_row: tuple[int, float, int]  # nonzeros a row: min, median, max
    value_min: float | None
    value_max: float | None
    label_distinct: int = 0  # 0: no label
    labels: dict[str, int] | None = None  # value -> rows; None: more than MAX_LABELS
    label_min: float | None = None
    label_max: float | None = None

    def as_dict(self) -> dict[str, Any]:
        low, median, high = self.per_row
        return {
            "format": "libsvm",
            "rows": self.rows,
            "features": self.features,
            "indices": {"first": self.first_index, "last": self.last_index},
            "nonzeros": self.nonzeros,
            "nonzeros_per_row": {"min": low, "median": median, "max": high},
            "values": {"min": self.value_min, "max": self.value_max},
            "label_distinct": self.label_distinct,
            "labels": self.labels,
            "label_range": {"min": self.label_min, "max": self.label_max},
        }


def describe_libsvm(source: TableSource, name: str) -> SparseSummary:
    """A summary of LIBSVM dataset `name` (`SparseSummary`), read as a job reads it.

    Raises:
        DataError: the file is missing, or a line is malformed (names the line).
    """
    raw = read_libsvm(existing(source, name), source, name)
    x = raw.sparse
    assert x is not None
    per_row = np.diff(x.indptr)
    indices = [int(n[1:]) for n in raw.sparse_names]  # named f<index>, in index order
    data = x.data
    summary = SparseSummary(
        raw.rows,
        len(indices),
        indices[0] if indices else None,
        indices[-1] if indices else None,
        int(x.nnz),
        (int(per_row.min()), float(np.median(per_row)), int(per_row.max()))
        if len(per_row)
        else (0, 0.0, 0),
        float(data.min()) if len(data) else None,
        float(data.max()) if len(data) else None,
    )
    if raw.labels is None or not len(raw.labels):
        return summary
    values, counts = np.unique(raw.labels, return_counts=True)
    labels = {f"{v:g}": int(c) for v, c in zip(values, counts, strict=True)}
    return replace(
        summary,
        label_distinct=len(values),
        labels=labels if len(values) <= MAX_LABELS else None,
        label_min=float(values[0]),
        label_max=float(values[-1]),
    )


def describe_dataset(source: TableSource, name: str) -> tuple[int, list[ColumnSummary]]:
    """(rows, a summary per column) of dataset `name` (csv, parquet, or sql: its query's
    rows, read into a temporary Parquet file).

    Raises:
        DataError: the file is missing, unreadable or lacks the id, label or a
            categorical column (`read_table`); the database fails (`party.tables.sql`).
        ConfigError: a sql dataset's credential is unset or refused.
    """
    if source.format == "sql":
        with tempfile.TemporaryDirectory(prefix="vfl-describe-") as tmp:
            path = Path(tmp) / f"{name}.parquet"
            write_parquet(source, name, path)
            return describe_dataset(as_parquet(source, path), name)
    read = read_table(source, name)
    roles = {read.column(source.id, "id"): "id"}
    if source.label:
        roles[read.column(source.label, "label")] = "label"
    overrides = {c: "categorical" for c in source.categorical or ()} | dict(source.columns or {})
    for column, kind in overrides.items():
        roles.setdefault(read.column(column, "overridden"), kind)
    return read.rows, [_checked_summary(read, c, roles.get(c)) for c in range(len(read.header))]


def _checked_summary(read: ReadTable, col: int, role: str | None) -> ColumnSummary:
    """Raises:
    DataError: the column holds bytes that are not UTF-8 text."""
    try:
        return _summary(read, col, role)
    except pa.ArrowInvalid as exc:
        if "UTF8" not in str(exc):
            raise
        if role == "ignore":  # left out: its bytes are never read as text
            column = read.data.column(col)
            missing = column.null_count / len(column) if len(column) else 0.0
            return ColumnSummary(read.header[col], "ignore", missing, 0)
        raise not_utf8(f"'{read.path}'", read.name, read.header[col]) from None


def _summary(read: ReadTable, col: int, role: str | None) -> ColumnSummary:
    name = read.header[col]
    column = read.data.column(col)
    if role == "ignore" and pa.types.is_nested(column.type):  # lists, structs: left out
        missing = column.null_count / len(column) if len(column) else 0.0
        return ColumnSummary(name, "ignore", missing, 0)
    if role == "id":
        ids = read.ids(col)
        missing = float(np.mean(ids == "")) if len(ids) else 0.0
        return ColumnSummary(name, "id", missing, len(set(ids[ids != ""])))
    values = read.numbers(col) if role != "categorical" else None
    if values is None:
        return _text_summary(read, col, role or "categorical")
    present = values.compressed()
    present = present[~np.isnan(present)]
    missing = (len(values) - len(present)) / len(values) if len(values) else 0.0
    kind = role or ("numeric" if len(present) else "empty")
    if not len(present):
        return ColumnSummary(name, kind, missing, 0)
    return ColumnSummary(
        name,
        kind,
        missing,
        len(np.unique(present)),
        float(present.min()),
        float(np.median(present)),
        float(present.max()),
    )


def _text_summary(read: ReadTable, col: int, kind: str) -> ColumnSummary:
    column = read.data.column(col)
    if not pa.types.is_string(column.type):
        column = pc.cast(column, pa.string())
    text = pc.utf8_trim_whitespace(column)
    present = pc.filter(text, pc.fill_null(pc.not_equal(text, ""), False))
    rows = len(column)
    missing = (rows - len(present)) / rows if rows else 0.0
    distinct = pc.count_distinct(present).as_py()
    return ColumnSummary(read.header[col], kind, missing, int(distinct))
