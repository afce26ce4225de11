"""Loading a party's rows: CSV (FATE hetero files), Parquet and LIBSVM (a9a split files).

`load_table` reads a `TableSource` (a party config's dataset: path, format, id, label,
categorical columns; for `libsvm`, `id` is "auto" (a leading `@7`/`7` token is the id,
otherwise the line number), "line" or "first", and any `label` means the file carries a
label token). A `Table` holds ids (as text), a float32 feature matrix and, at the
active party, the raw label column. CSV and Parquet go through the typed table reader
(`party.tables.reader`, pyarrow) and their features are a dense array; LIBSVM features stay
a CSR matrix (`scipy.sparse`) from the file on, holding only the columns that occur in
the file (named by their index, `f<index>`), so a table of 1e6 hashed columns takes
memory in proportion to its nonzeros, never rows x columns. `with_columns` gives a table
the columns of another (a test table or rows to score, those of the training table).
Every malformed input raises `DataError` naming the file, line and column, and what to
do; its public form (`party.errors`) says what kind of problem it is and names only the
dataset.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeAlias

import numpy as np
import pyarrow as pa
import scipy.sparse as sp
from vfl.contract.spec import TableSource
from vfl.party.errors import DataError
from vfl.party.tables.columns import column_index, row_place
from vfl.party.tables.reader import IDS, existing, name_bad_cell, scan_arrow, scan_table

Features: TypeAlias = np.ndarray | sp.csr_matrix


@dataclass(frozen=True)
class Table:
    ids: np.ndarray  # numpy strings (`party.tables.reader.IDS`)
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
        ids: np.ndarray,  # numpy strings (`party.tables.reader.IDS`)
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


def load_table(cfg: TableSource, name: str) -> Table:
    """Load and check dataset `name` (the name only labels messages), preprocessed as its
    `preprocess:` setting says, fitted on every row (a job fits on its training rows:
    `read_raw` and `party.tables.preprocess.fit`).

    Raises:
        DataError: missing file, unknown id or label column, non-numeric/NaN values (with
            preprocess: none), no rows.
    """
    from vfl.party.tables.preprocess import fit  # noqa: PLC0415 - it builds on this module

    raw = read_raw(cfg, name)
    table, _ = fit(raw, None, cfg.preprocess or "auto").apply(raw, f"dataset '{name}'")
    return table


def read_raw(
    cfg: TableSource,
    name: str,
    mode: str | None = None,
    schema: dict[str, str] | None = None,
    check: Callable[[int], None] | None = None,
) -> RawTable:
    """Dataset `name` as raw typed columns, before preprocessing. `mode`: the preprocessing
    it is read for (default: the dataset's `preprocess:`); with `none`, every feature must
    be a number and every categorical cell an integer code, as before preprocessing
    existed. `schema` (column -> numeric, categorical or ignore): the kinds a fitted model
    reads (else the dataset's `columns:` and `categorical:`, then inference). `check`:
    called before each block of a CSV or Parquet file is read, with the bytes read so far
    (`scan_table`).

    Raises:
        DataError: missing file, unknown id, label or overridden column, a malformed value
            (preprocess: none), a numeric override on a column of words, no rows.
        Exception: what `check` raises (a job the party's limits guard failed).
    """
    mode = mode or cfg.preprocess or "auto"
    if cfg.format in ("csv", "parquet"):
        raw = _raw_columns(cfg, name, mode, schema, check=check)
    elif cfg.format == "libsvm":
        raw = _raw_libsvm(_load_libsvm(existing(cfg, name), cfg, name), name)
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
        raise DataError(
            f"dataset '{name}' ('{cfg.path}'): label is NaN at data row {r + 1}",
            public=f"dataset '{name}': a label is NaN",
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


def _raw_columns(
    cfg: TableSource,
    name: str,
    mode: str,
    schema: dict[str, str] | None,
    data: pa.Table | None = None,
    check: Callable[[int], None] | None = None,
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


def _raw_libsvm(table: Table, name: str) -> RawTable:
    assert not isinstance(table.features, np.ndarray)
    return RawTable(
        name, table.ids, table.labels, (), sparse=table.features, sparse_names=table.feature_names
    )


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _load_libsvm(path: Path, cfg: TableSource, name: str) -> Table:
    """A CSR table of the columns that occur in the file (memory O(nonzeros))."""
    ids: list[str] = []
    labels = array("d")
    indptr, cols, vals = array("q", [0]), array("q"), array("f")
    has_label = bool(cfg.label)
    with path.open() as fh:
        for line_no, line in enumerate(fh):
            tokens = line.split()
            if not tokens:
                continue
            lead = 0
            while lead < len(tokens) and ":" not in tokens[lead]:
                lead += 1
            rid, label = _libsvm_lead(tokens[:lead], line_no, has_label, cfg, name, path)
            ids.append(rid)
            if has_label:
                labels.append(label)
            for tok in tokens[lead:]:
                c, v = _libsvm_entry(tok, line_no, name, path)
                cols.append(c)
                vals.append(v)
            indptr.append(len(cols))
    index = np.frombuffer(cols, dtype=np.int64) if cols else np.zeros(0, dtype=np.int64)
    used, inverse = np.unique(index, return_inverse=True)  # the columns that occur
    feats = sp.csr_matrix(
        (
            np.frombuffer(vals, dtype=np.float32) if vals else np.zeros(0, np.float32),
            inverse.astype(np.int32),
            np.frombuffer(indptr, dtype=np.int64),
        ),
        shape=(len(ids), len(used)),
    )
    feats.sum_duplicates()  # a repeated index in a line adds up, as in a sum of one-hots
    names = tuple(f"f{int(i)}" for i in used)  # as the file numbers them (0- or 1-based)
    return Table(
        np.array(ids, dtype=IDS),
        feats,
        np.frombuffer(labels, dtype=np.float64).copy() if has_label else None,
        names,
    )


def _libsvm_lead(lead, line_no, has_label, cfg, name, path) -> tuple[str, float]:
    want_id = (
        cfg.id == "first"
        or (cfg.id == "auto" and len(lead) == 1 + has_label)
        or (cfg.id == "auto" and lead and lead[0].startswith("@"))
    )
    if cfg.id == "line":
        want_id = False
    expected = int(want_id) + int(has_label)
    if len(lead) != expected:
        settings = f"(id: {cfg.id}, label: {'yes' if has_label else 'no'})"
        raise DataError(
            f"dataset '{name}': line {line_no + 1} of '{path}' has {len(lead)} leading "
            f"token(s) before the features, expected {expected} {settings}; check the "
            "dataset's 'id' and 'label' settings",
            public=f"dataset '{name}': a line has {len(lead)} leading token(s) before the "
            f"features, expected {expected} {settings}; check its 'id' and 'label' settings",
        )
    rid = lead[0].lstrip("@") if want_id else str(line_no)
    label = 0.0
    if has_label:
        text = lead[-1]
        if not _is_float(text):
            raise DataError(
                f"dataset '{name}': label {text!r} at line {line_no + 1} of "
                f"'{path}' is not a number",
                public=f"dataset '{name}': a label is not a number",
            )
        label = float(text)
    return rid, label


def _libsvm_entry(tok: str, line_no: int, name: str, path: Path) -> tuple[int, float]:
    idx, _, val = tok.partition(":")
    if not idx.isdigit() or not _is_float(val):
        raise DataError(
            f"dataset '{name}': '{tok}' at line {line_no + 1} of '{path}' is not a "
            "LIBSVM 'index:value' pair",
            public=f"dataset '{name}': a token is not a LIBSVM 'index:value' pair",
        )
    return int(idx), float(val)
