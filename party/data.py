"""Loading a party's rows: CSV (FATE hetero files), Parquet and LIBSVM (a9a split files).

`load_table` reads a `TableSource` (a party config's dataset: path, format, id, label,
categorical columns; for `libsvm`, `id` is "auto" (a leading `@7`/`7` token is the id,
otherwise the line number), "line" or "first", and any `label` means the file carries a
label token). A `Table` holds ids (as text), a float32 feature matrix and, at the
active party, the raw label column. CSV and Parquet go through the typed table reader
(`party.reader`, pyarrow) and their features are a dense array; LIBSVM features stay
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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeAlias

import numpy as np
import scipy.sparse as sp
from vfl.contract.spec import TableSource
from vfl.party.errors import DataError
from vfl.party.reader import ReadTable, existing, read_table

Features: TypeAlias = np.ndarray | sp.csr_matrix


@dataclass(frozen=True)
class Table:
    ids: np.ndarray  # dtype object (str)
    features: Features  # float32, (rows, d): dense (CSV) or CSR (LIBSVM)
    labels: np.ndarray | None  # float64, (rows,)
    feature_names: tuple[str, ...]
    categorical: np.ndarray | None = None  # int64, (rows, fields)
    cardinalities: tuple[int, ...] = ()  # per categorical field: max code + 1

    @property
    def rows(self) -> int:
        return len(self.ids)


def load_table(cfg: TableSource, name: str) -> Table:
    """Load and check dataset `name` (the name only labels messages).

    Raises:
        DataError: missing file, unknown id or label column, non-numeric/NaN values, no rows.
    """
    if cfg.format in ("csv", "parquet"):
        table = _load_columns(read_table(cfg, name, typed=True), cfg)
    elif cfg.format == "libsvm":
        table = _load_libsvm(existing(cfg, name), cfg, name)
    else:
        raise DataError(
            f"dataset '{name}': unknown format '{cfg.format}'; use csv, parquet or libsvm"
        )
    if table.rows == 0:
        raise DataError(
            f"dataset '{name}': '{cfg.path}' has no data rows",
            public=f"dataset '{name}' has no data rows",
        )
    bad = _non_finite(table.features)
    if bad is not None:
        r, c = bad
        raise DataError(
            f"dataset '{name}' ('{cfg.path}'): feature '{table.feature_names[c]}' is NaN or "
            f"infinite at data row {r + 1}; clean or impute the column before training",
            public=f"dataset '{name}': a feature is NaN or infinite; the party must clean or "
            "impute it before training",
        )
    if table.labels is not None and not np.all(np.isfinite(table.labels)):
        r = int(np.argwhere(~np.isfinite(table.labels))[0][0])
        raise DataError(
            f"dataset '{name}' ('{cfg.path}'): label is NaN at data row {r + 1}",
            public=f"dataset '{name}': a label is NaN",
        )
    return table


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


def _load_columns(read: ReadTable, cfg: TableSource) -> Table:
    """Today's `Table` from the typed columns: float32 features column by column from the
    arrow buffers (never a Python object per cell), ids as text, integer codes."""
    id_col = read.column(cfg.id, "id")
    label_col = read.column(cfg.label, "label") if cfg.label else None
    cat_cols = [read.column(c, "categorical") for c in cfg.categorical or ()]
    skip = (id_col, label_col, *cat_cols)
    feat_cols = [i for i in range(len(read.header)) if i not in skip]
    feats = np.empty((read.rows, len(feat_cols)), dtype=np.float32)
    for j, c in enumerate(feat_cols):
        feats[:, j] = read.floats(c)
    labels = read.floats(label_col) if label_col is not None else None
    cats, cards = _categorical(read, cat_cols)
    names = tuple(read.header[i] for i in feat_cols)
    return Table(read.ids(id_col), feats, labels, names, cats, cards)


def _categorical(read: ReadTable, cols: list[int]) -> tuple[np.ndarray | None, tuple[int, ...]]:
    if not cols:
        return None, ()
    out = np.empty((read.rows, len(cols)), dtype=np.int64)
    for j, c in enumerate(cols):
        out[:, j] = read.codes(c)
    if out.size and out.min() < 0:
        raise DataError(f"dataset '{read.name}': categorical codes must be >= 0")
    return out, tuple(int(v) + 1 for v in out.max(axis=0))


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
        np.array(ids, dtype=object),
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
