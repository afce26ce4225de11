"""Loading a party's rows: CSV (FATE hetero files), Parquet and LIBSVM (a9a split files).

`read_raw` reads a `TableSource` (a party config's dataset: path, format, id, label,
categorical columns) as a `RawTable` (`party.tables.table`), the raw typed columns a job
fits its preprocessing on; `raw_rows` does the same for rows already in memory (those a
database gave by id). CSV and Parquet go through the typed table reader
(`party.tables.reader`, pyarrow), LIBSVM through `party.tables.libsvm` (a CSR matrix).
`load_table` reads a dataset and preprocesses it, fitted on every row
(`party.tables.preprocess`): the one place that does both. Every malformed input raises `DataError`
naming the file, line and column, and what to do; its public form (`party.errors`) says
what kind of problem it is and names only the dataset.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
from vfl.contract.spec import TableSource
from vfl.party.errors import DataError
from vfl.party.tables.libsvm import read_libsvm
from vfl.party.tables.preprocess.fit import fit
from vfl.party.tables.reader.columns import column_index
from vfl.party.tables.reader.files import existing
from vfl.party.tables.reader.scan import scan_arrow, scan_table
from vfl.party.tables.reader.whole import name_bad_cell
from vfl.party.tables.table import Features, RawColumn, RawTable, Table


def load_table(cfg: TableSource, name: str) -> Table:
    """Load and check dataset `name` (the name only labels messages), preprocessed as its
    `preprocess:` setting says, fitted on every row (a job fits on its training rows:
    `read_raw` and `party.tables.preprocess.fit.fit`).

    Raises:
        DataError: missing file, unknown id or label column, non-numeric/NaN values (with
            preprocess: none), no rows.
    """
    raw = read_raw(cfg, name)
    table, _ = fit(raw, None, cfg.preprocess or "auto").apply(raw, f"dataset '{name}'")
    return table


def read_raw(
    cfg: TableSource,
    name: str,
    mode: str | None = None,
    schema: dict[str, str] | None = None,
    check: Callable[[int, int], None] | None = None,
) -> RawTable:
    """Dataset `name` as raw typed columns, before preprocessing. `mode`: the preprocessing
    it is read for (default: the dataset's `preprocess:`); with `none`, every feature must
    be a number and every categorical cell an integer code, as before preprocessing
    existed. `schema` (column -> numeric, categorical or ignore): the kinds a fitted model
    reads (else the dataset's `columns:` and `categorical:`, then inference). `check`:
    called before each block of the file is read, with the bytes and rows read so far
    (`scan_table`, `read_libsvm`).

    Raises:
        DataError: missing file, unknown id, label or overridden column, a malformed value
            (preprocess: none), a numeric override on a column of words, no rows.
        Exception: what `check` raises (a job the party's limits guard failed).
    """
    mode = mode or cfg.preprocess or "auto"
    if cfg.format in ("csv", "parquet"):
        raw = _raw_columns(cfg, name, mode, schema, check=check)
    elif cfg.format == "libsvm":
        raw = read_libsvm(existing(cfg, name), cfg, name, check)
    elif cfg.format == "sql":  # jobs read a snapshot of it (`party.tables.sql`), as parquet
        raise DataError(
            f"dataset '{name}' is read from a database: jobs and predictions read it through "
            "the snapshot they take when prepared, online scoring by id (`raw_rows`)"
        )
    else:
        raise DataError(
            f"dataset '{name}': unknown format '{cfg.format}'; use csv, parquet or libsvm"
        )
    if raw.rows == 0:
        raise DataError(
            f"dataset '{name}': '{cfg.path}' has no data rows",
            public=f"dataset '{name}' has no data rows",
        )
    _check_finite(raw, cfg, name, mode)
    return raw


def raw_rows(
    data: pa.Table, cfg: TableSource, name: str, mode: str, schema: dict[str, str]
) -> RawTable:
    """Rows of dataset `name` already in memory as an Arrow table (those a database gave
    for some ids, typed as a snapshot of it) as raw typed columns, read as `read_raw`
    reads a table file for a fitted model (`mode`, `schema`: its preprocessing).

    Raises:
        DataError: no id or label column, a malformed value (preprocess: none).
    """
    raw = _raw_columns(cfg, name, mode, schema, data)
    _check_finite(raw, cfg, name, mode)
    return raw


def _check_finite(raw: RawTable, cfg: TableSource, name: str, mode: str) -> None:
    """Raises:
    DataError: (preprocess: none) a NaN or infinite feature; a NaN label."""
    bad = _first_non_finite(raw) if mode == "none" else None  # others impute or clip them
    if bad is not None:
        r, column = bad
        raise DataError(
            f"dataset '{name}' ('{cfg.path}'): feature '{column}' is NaN or infinite at data "
            f"row {r + 1}; clean the column, or preprocess the dataset (preprocess: auto)",
            public=f"dataset '{name}': a feature is NaN or infinite; the party must clean it "
            "or preprocess the dataset",
        )
    if raw.labels is not None and not np.all(np.isfinite(raw.labels)):
        r = int(np.argwhere(~np.isfinite(raw.labels))[0][0])
        what = "empty or NaN" if np.isnan(raw.labels[r]) else "infinite"
        fix = "give every row a finite label, or drop the rows without one"
        raise DataError(
            f"dataset '{name}' ('{cfg.path}'): the label is {what} at data row {r + 1}; {fix}",
            public=f"dataset '{name}': a label is {what}; {fix}",
        )


def _first_non_finite(raw: RawTable) -> tuple[int, str] | None:
    """(row, column name) of the first NaN or infinite feature of `raw`, if any."""
    if raw.sparse is not None:
        found = _non_finite(raw.sparse)
        return None if found is None else (found[0], raw.sparse_names[found[1]])
    for col in raw.columns:
        if col.values is not None and (found := _non_finite(col.values[:, None])) is not None:
            return found[0], col.name
    return None


def _non_finite(x: Features) -> tuple[int, int] | None:
    """(row, column) of the first NaN or infinite feature, if any (nonzeros only when sparse)."""
    if not isinstance(x, np.ndarray):  # CSR
        bad = np.flatnonzero(~np.isfinite(x.data))
        if not len(bad):
            return None
        return int(np.searchsorted(x.indptr, bad[0], side="right") - 1), int(x.indices[bad[0]])
    if np.all(np.isfinite(x)):
        return None
    r, c = np.argwhere(~np.isfinite(x))[0]
    return int(r), int(c)


def _raw_columns(
    cfg: TableSource,
    name: str,
    mode: str,
    schema: dict[str, str] | None,
    data: pa.Table | None = None,
    check: Callable[[int, int], None] | None = None,
) -> RawTable:
    """The typed columns of a CSV or Parquet table (or of the rows `data`, in memory),
    each numeric (float32, NaN where empty), text (codes into its words) or ignored, by
    `schema`, else the dataset's settings, else inference."""
    overrides = dict(cfg.columns or {})
    for column in cfg.categorical or ():
        overrides.setdefault(column, "categorical")
    kinds = schema if schema is not None else overrides
    text = [c for c, kind in kinds.items() if kind == "categorical"]
    skip = [c for c, kind in kinds.items() if kind == "ignore"]
    typed = mode == "none"
    if data is None:
        scanned = scan_table(cfg, name, typed=typed, text=text, skip=skip, check=check)
    else:
        scanned = scan_arrow(data, cfg, name, typed=typed, text=text, skip=skip)
    if schema is None:
        for column in overrides:
            column_index(scanned.header, column, "overridden", name)
    columns = []
    for column in scanned.header:
        if column in (cfg.id, cfg.label):
            continue
        kind = kinds.get(column)
        if kind == "ignore":
            columns.append(RawColumn(column, ignored=True, lines=scanned.lines, dataset=name))
        elif column in scanned.texts:
            codes, words = scanned.texts[column]
            col = RawColumn(column, codes=codes, words=words, lines=scanned.lines, dataset=name)
            if kind != "categorical" and mode == "none":
                _bad_cell(cfg, name, column, data)
            if kind == "numeric" and schema is None:
                word, where = col.first_word()
                raise DataError(
                    f"dataset '{name}': column '{column}' is set numeric but holds "
                    f"{word!r} at {where}; fix the value, or drop the override",
                    public=f"dataset '{name}': a column set numeric holds words",
                )
            columns.append(col)
        else:
            values = scanned.numbers[column]
            columns.append(RawColumn(column, values=values, lines=scanned.lines, dataset=name))
    return RawTable(name, scanned.ids, scanned.labels, tuple(columns))


def _bad_cell(cfg: TableSource, name: str, column: str, data: pa.Table | None) -> None:
    """Raise the error naming the first cell of text column `column` (preprocess: none):
    its line in the table file, or, for rows in memory, the column."""
    if data is None:
        name_bad_cell(cfg, name, column)
    raise DataError(
        f"dataset '{name}': column '{column}' holds a value that is not a number "
        "(preprocess: none); fix it, or preprocess the dataset (preprocess: auto)",
        public=f"dataset '{name}': a column cannot be read as numbers",
    )
