"""Per-party preprocessing: fitted on the party's own training rows, kept with its model
part, applied identically in training, validation, batch prediction and online scoring.

`fit(raw, rows, mode)` learns a `Preprocessor` from the training rows `rows` of a
`RawTable` (`party.tables.data.read_raw`); `Preprocessor.apply(raw)` turns any table of the same
columns into the model's inputs (a `Table`) and counts drift. The fitted statistics are
the party's own: nothing of them leaves it (the other parties learn the number of input
columns, as they did before). A `Preprocessor` is JSON (pydantic), never pickle.

Modes (a dataset's `preprocess:`):

    auto    numbers: empty cells imputed with the training median (plus a 0/1
            missing-indicator column when the training rows had empty cells), a log
            (log1p) for non-negative columns whose skewness exceeds `LOG_SKEW`, clipped to
            the training quantiles `CLIP_QUANTILE`..1-`CLIP_QUANTILE`, then z-scored;
            0/1 columns stay as they are. Words: categorical, through a vocabulary of the
            values seen at least `MIN_COUNT` times (at most `MAX_CATEGORIES`, the most
            frequent); code 0 is the unknown bucket, 1 an empty cell. A column of at most
            `ONE_HOT_MAX` codes is one-hot (0/1 numeric inputs: cheap in the secure
            MatMul layer), a larger one goes through an embedding (blindfl: the
            Embed-MatMul layer).
    zscore  the same, with plain z-scores (no log, no quantile clip): the comparison.
    none    the features as they are: numbers only, no empty cells, categorical columns
            of integer codes (codes 0..max seen in training).

Every mode but `none` bounds its outputs to +-`Z_LIMIT`, so the secure layer of
`protocol: blindfl` always holds them. LIBSVM (sparse) tables keep their sparsity: a
column is divided by its standard deviation (not centred); 0/1 columns stay as they are.

Drift: `apply` counts, per column, values outside the fitted range, categories that fall
into the unknown bucket and empty cells in a column that had none in training. These are
not errors; a missing or extra column, or a numeric column that now holds words, is.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Annotated, Literal

import numpy as np
import scipy.sparse as sp
from pydantic import BaseModel, ConfigDict, Field
from vfl.contract.spec.data import Preprocess
from vfl.party.errors import DataError
from vfl.party.tables.data import RawColumn, RawTable, Table, with_columns

Z_LIMIT = 8.0  # |input| after preprocessing (auto, zscore)
LOG_SKEW = 1.0  # a non-negative column more skewed than this is logged
CLIP_QUANTILE = 0.001
MIN_COUNT = 2  # a category seen fewer times in training goes to the unknown bucket
MAX_CATEGORIES = 1000
ONE_HOT_MAX = 16  # a vocabulary of at most this many codes is one-hot, a larger one embedded
UNKNOWN, EMPTY = 0, 1  # the codes of a category never fitted and of an empty cell
MISSING_SUFFIX = " (missing)"
SECURE_LIMIT = 64.0  # |feature| the blindfl source layers hold: |Z| < 128 at their fixed point


class _Fitted(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Numeric(_Fitted):
    """A numeric column: raw value -> impute -> [log1p] -> clip -> z-score."""

    name: str
    kind: Literal["numeric"] = "numeric"
    fill: float = 0.0  # the raw value an empty cell takes (the training median)
    indicator: bool = False  # a missing-indicator column follows the features
    log: bool = False
    lo: float | None = None  # clip bounds, after the log (None: no clip)
    hi: float | None = None
    center: float = 0.0
    scale: float = 1.0
    min: float | None = None  # the training rows' range of raw values (drift)
    max: float | None = None
    limit: float | None = Z_LIMIT  # None: outputs unbounded (mode none)


class Categorical(_Fitted):
    """A categorical column: a vocabulary (codes 2.. in order; 0 unknown, 1 empty), or,
    in mode none, integer codes 0..cardinality-1 as the file holds them."""

    name: str
    kind: Literal["categorical"] = "categorical"
    vocabulary: tuple[str, ...] | None = None  # None: the file's own integer codes
    cardinality: int
    one_hot: bool = False  # fed as `cardinality` 0/1 columns, not through an embedding

    @property
    def one_hot_names(self) -> tuple[str, ...]:
        words = ("(unknown)", "(empty)", *(self.vocabulary or ()))
        return tuple(f"{self.name}={w}" for w in words)


class Ignored(_Fitted):
    name: str
    kind: Literal["ignore"] = "ignore"


Column = Annotated[Numeric | Categorical | Ignored, Field(discriminator="kind")]


class SparseScales(_Fitted):
    """A LIBSVM table's columns (by index name) and the divisor of each (values beyond
    +-`Z_LIMIT` after it are clipped and counted as out of range)."""

    names: tuple[str, ...]
    scales: tuple[float, ...]


DRIFT_KINDS = ("out_of_range", "unknown_categories", "unexpected_missing")


@dataclass
class Drift:
    """What `apply` counted: per column, values outside the fitted range, categories sent
    to the unknown bucket, empty cells where the training rows had none (logged at the
    party only); per row, how many cells of each kind (`per_row`, rows x 3, in the order
    of `DRIFT_KINDS`), so that a scoring counts the rows it scored."""

    rows: int = 0
    out_of_range: dict[str, int] = field(default_factory=dict)
    unknown: dict[str, int] = field(default_factory=dict)
    missing: dict[str, int] = field(default_factory=dict)
    per_row: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), dtype=np.int32))
    by_row: bool = True  # False: per column only (a job's apply), no rows x 3 array

    def __post_init__(self) -> None:
        if self.by_row and len(self.per_row) != self.rows:
            self.per_row = np.zeros((self.rows, len(DRIFT_KINDS)), dtype=np.int32)

    def totals(self, rows: np.ndarray | None = None) -> dict[str, int]:
        """Counts by kind, over every row or over `rows` (positions)."""
        counts = self.per_row if rows is None else self.per_row[rows]
        return {k: int(v) for k, v in zip(DRIFT_KINDS, counts.sum(axis=0), strict=True)}

    def count(self, kind: int, name: str, mask: np.ndarray) -> None:
        """Count the cells `mask` (a boolean per row) of column `name` as drift `kind`."""
        n = int(np.count_nonzero(mask))
        if not n:
            return
        into = (self.out_of_range, self.unknown, self.missing)[kind]
        into[name] = into.get(name, 0) + n
        if self.by_row:
            self.per_row[:, kind] += mask


OUT_OF_RANGE, UNKNOWN_CATEGORY, UNEXPECTED_MISSING = range(3)


class Preprocessor(_Fitted):
    """One party's fitted preprocessing of one dataset's columns."""

    mode: Preprocess
    columns: tuple[Column, ...] = ()
    sparse: SparseScales | None = None

    def kinds(self) -> dict[str, str]:
        """column name -> numeric | categorical | ignore, as fitted (a dense table)."""
        return {c.name: c.kind for c in self.columns}

    @property
    def numeric(self) -> tuple[Numeric, ...]:
        return tuple(c for c in self.columns if isinstance(c, Numeric))

    @property
    def categorical(self) -> tuple[Categorical, ...]:
        return tuple(c for c in self.columns if isinstance(c, Categorical))

    @property
    def embedded(self) -> tuple[Categorical, ...]:
        """The categorical columns fed through embeddings (the rest are one-hot)."""
        return tuple(c for c in self.categorical if not c.one_hot)

    @property
    def feature_names(self) -> tuple[str, ...]:
        """The model's numeric inputs: the numeric columns, their missing indicators, the
        one-hot columns of small vocabularies."""
        if self.sparse is not None:
            return self.sparse.names
        nums = self.numeric
        names = [c.name for c in nums] + [c.name + MISSING_SUFFIX for c in nums if c.indicator]
        return tuple(names) + tuple(
            n for c in self.categorical if c.one_hot for n in c.one_hot_names
        )

    def apply(
        self, raw: RawTable, what: str, rows: np.ndarray | None = None, consume: bool = False
    ) -> tuple[Table, Drift]:
        """`raw` (its rows `rows`, in that order; None: every row) as the model's inputs,
        and what drifted (`what` names the table in errors). Only the rows asked for are
        written: a job asks for its aligned rows, so they are never copied again. With
        `consume` (a job's one pass) each raw column is released once written, so the
        table is never held twice, and drift is counted per column only.

        Raises:
            DataError: its columns differ from the fitted ones (a column missing, an
                extra one, a numeric column holding words), or (mode none) a categorical
                code beyond those trained.
        """
        n = raw.rows if rows is None else len(rows)
        drift = Drift(n, by_row=not consume)
        if self.sparse is not None:
            return self._apply_sparse(raw, what, drift, rows), drift
        self._check_columns(raw, what)
        nums = self.numeric
        # column-major: writing a column touches only its own pages, so each raw column
        # is released before the next is written (row-major, the first column written
        # would touch every page of the matrix while the raw table is still whole)
        feats = np.zeros((n, len(self.feature_names)), dtype=np.float32, order="F")
        k = len(nums)
        for j, col in enumerate(nums):
            values = raw.column(col.name).values
            assert values is not None  # _check_columns
            feats[:, j], missing = _numeric(col, _take(values, rows), drift)
            if col.indicator:
                feats[:, k] = missing
                k += 1
            if consume:
                del values
                raw.release(col.name)
        for cat in self.categorical:
            if cat.one_hot:
                codes_of = _codes(cat, raw.column(cat.name), what, drift, rows)
                feats[np.arange(n), k + codes_of] = 1.0
                k += cat.cardinality
                if consume:
                    raw.release(cat.name)
        cats = self.embedded
        codes = np.empty((n, len(cats)), dtype=np.int64) if cats else None
        for j, cat in enumerate(cats):
            assert codes is not None
            codes[:, j] = _codes(cat, raw.column(cat.name), what, drift, rows)
            if consume:
                raw.release(cat.name)
        table = Table(
            _take(raw.ids, rows),
            feats,
            None if raw.labels is None else _take(raw.labels, rows),
            self.feature_names,
            codes,
            tuple(c.cardinality for c in cats),
        )
        return table, drift

    def _check_columns(self, raw: RawTable, what: str) -> None:
        fitted = {c.name: c for c in self.columns}
        have = {c.name: c for c in raw.columns}
        lacking = [n for n, c in fitted.items() if n not in have and c.kind != "ignore"]
        extra = [n for n in have if n not in fitted]
        if lacking or extra:
            parts = []
            if lacking:
                parts.append(f"lacks the model's column(s) {_names(lacking)}")
            if extra:
                parts.append(f"has column(s) the model was not trained on {_names(extra)}")
            raise DataError(
                f"{what}: it {' and '.join(parts)}; give it the training columns "
                "(set 'columns: {NAME: ignore}' on the dataset for a column to leave out)",
                public=f"{what}: its columns differ from the training columns (a column is "
                "missing or extra); the party must give it the training columns",
            )
        for col in self.numeric:
            raw_col = have[col.name]
            if raw_col.values is None:
                word, where = raw_col.first_word()
                raise DataError(
                    f"{what}: column '{col.name}' held numbers in training and now holds "
                    f"words ({word!r} at {where}); give it numbers, or "
                    "train the model again with the column as categorical",
                    public=f"{what}: a column that held numbers in training now holds words",
                )

    def _apply_sparse(
        self, raw: RawTable, what: str, drift: Drift, rows: np.ndarray | None
    ) -> Table:
        assert self.sparse is not None and raw.sparse is not None
        table = with_columns(raw.sparse_table(rows), self.sparse.names, what)
        x = sp.csr_matrix(table.features, dtype=np.float32, copy=True)
        scales = np.asarray(self.sparse.scales, dtype=np.float32)
        x.data /= scales[x.indices]
        outside = np.abs(x.data) > Z_LIMIT
        if outside.any() and self.mode != "none":
            rows = np.repeat(np.arange(x.shape[0]), np.diff(x.indptr))
            for j in np.unique(x.indices[outside]):
                hit = outside & (x.indices == j)
                mask = np.zeros(x.shape[0], dtype=bool)
                mask[rows[hit]] = True
                drift.count(OUT_OF_RANGE, self.sparse.names[j], mask)
            np.clip(x.data, -Z_LIMIT, Z_LIMIT, out=x.data)
        return Table(table.ids, x, table.labels, self.sparse.names)


def fit(raw: RawTable, rows: np.ndarray | None, mode: Preprocess) -> Preprocessor:
    """The preprocessing of `raw` fitted on its rows `rows` (None: every row)."""
    if raw.sparse is not None:
        return _fit_sparse(raw, rows, mode)
    columns: list[Numeric | Categorical | Ignored] = []
    for col in raw.columns:
        if col.ignored:
            columns.append(Ignored(name=col.name))
        elif col.values is not None:
            values = col.values if rows is None else col.values[rows]
            columns.append(_fit_numeric(col.name, values, mode))
        elif mode == "none":
            codes = col.integer_codes()
            if codes.size and codes.min() < 0:
                raise DataError(f"dataset '{raw.name}': categorical codes must be >= 0")
            top = int(codes.max(initial=-1))  # every row's: the codes are the file's own
            columns.append(Categorical(name=col.name, cardinality=top + 1))
        else:
            columns.append(_fit_vocabulary(col, rows))
    return Preprocessor(mode=mode, columns=tuple(columns))


def _fit_numeric(name: str, values: np.ndarray, mode: Preprocess) -> Numeric | Ignored:
    if mode == "none":
        return Numeric(name=name, limit=None)
    x = values.astype(np.float64)
    missing = np.isnan(x)
    present = x[~missing & np.isfinite(x)]
    if not len(present):
        return Ignored(name=name)  # no value to learn from
    lo_raw, hi_raw = float(present.min()), float(present.max())
    fill, indicator = float(np.median(present)), bool(missing.any())
    common = {"name": name, "fill": fill, "indicator": indicator, "min": lo_raw, "max": hi_raw}
    if np.all((present == 0) | (present == 1)):
        return Numeric(**common, lo=0.0, hi=1.0)  # a 0/1 column stays as it is
    log = mode == "auto" and lo_raw >= 0 and _skewness(present) > LOG_SKEW
    t = np.log1p(present) if log else present
    lo = hi = None
    if mode == "auto":
        lo, hi = (float(v) for v in np.quantile(t, [CLIP_QUANTILE, 1 - CLIP_QUANTILE]))
        t = np.clip(t, lo, hi)
    center, scale = float(t.mean()), float(t.std())
    return Numeric(**common, log=log, lo=lo, hi=hi, center=center, scale=scale or 1.0)


def _skewness(x: np.ndarray) -> float:
    sd = x.std()
    return 0.0 if sd == 0 else float(np.mean(((x - x.mean()) / sd) ** 3))


def _fit_vocabulary(col: RawColumn, rows: np.ndarray | None) -> Categorical:
    assert col.codes is not None and col.words is not None
    words = col.words
    codes = col.codes if rows is None else col.codes[rows]
    counts = np.bincount(codes[codes >= 0], minlength=len(words))
    order = sorted(
        (i for i in range(len(words)) if counts[i] >= MIN_COUNT),
        key=lambda i: (-counts[i], words[i]),
    )[:MAX_CATEGORIES]
    vocabulary = tuple(words[i] for i in order)
    cardinality = len(vocabulary) + 2
    one_hot = cardinality <= ONE_HOT_MAX
    return Categorical(
        name=col.name, vocabulary=vocabulary, cardinality=cardinality, one_hot=one_hot
    )


def _fit_sparse(raw: RawTable, rows: np.ndarray | None, mode: Preprocess) -> Preprocessor:
    """Per column, the divisor of a LIBSVM table: its standard deviation over the training
    rows (zeros included, not centred, so the matrix stays sparse); 1 for a 0/1 column."""
    assert raw.sparse is not None
    x = sp.csr_matrix(raw.sparse if rows is None else raw.sparse[rows], dtype=np.float64)
    scales = np.ones(x.shape[1])
    if mode != "none" and x.shape[0]:
        binary = np.ones(x.shape[1], dtype=bool)
        binary[np.unique(x.indices[x.data != 1])] = False
        mean = np.asarray(x.mean(axis=0)).ravel()
        square = np.asarray(x.multiply(x).mean(axis=0)).ravel()
        std = np.sqrt(np.maximum(square - mean**2, 0.0))
        scales = np.where(binary | (std == 0), 1.0, std)
    names = raw.sparse_names
    sparse = SparseScales(names=names, scales=tuple(float(s) for s in scales))
    return Preprocessor(mode=mode, sparse=sparse)


def check_secure_bounds(raw: RawTable, mode: Preprocess | None, party_id: str) -> None:
    """Make sure `protocol: blindfl`'s secure layer can hold `raw`'s features: preprocessed
    ones are bounded by construction; with `preprocess: none`, every value must lie within
    +-`SECURE_LIMIT`.

    Raises:
        DataError: a column beyond it (names the party, dataset, column and the fix).
    """
    if mode != "none":
        return
    if raw.sparse is not None:
        data = np.abs(raw.sparse.data)
        if not data.size or data.max() <= SECURE_LIMIT:
            return
        at = int(np.argmax(data))
        column = raw.sparse_names[int(raw.sparse.indices[at])]
        _beyond(raw, party_id, column, float(data[at]))
    for col in raw.columns:
        if col.values is not None and col.values.size:
            top = float(np.nanmax(np.abs(col.values)))
            if top > SECURE_LIMIT:
                _beyond(raw, party_id, col.name, top)


def _beyond(raw: RawTable, party_id: str, column: str, top: float) -> None:
    message = (
        f"party '{party_id}': dataset '{raw.name}': column '{column}' holds values up to "
        f"{top:g}, beyond the +-{SECURE_LIMIT:g} that protocol blindfl's secure layer holds; "
        "remove 'preprocess: none' from the dataset (the default preprocessing scales "
        "every column) or scale the column yourself"
    )
    raise DataError(message, public=message)


def _numeric(col: Numeric, values: np.ndarray, drift: Drift) -> tuple[np.ndarray, np.ndarray]:
    """(the column's model input, its 0/1 missing indicator)."""
    x = values.astype(np.float64)
    missing = np.isnan(x)
    if col.limit is None:  # mode none: as the file holds it (read_raw refused empty cells)
        return x, missing
    if missing.any():
        if not col.indicator:
            drift.count(UNEXPECTED_MISSING, col.name, missing)
        x[missing] = col.fill
    if col.min is not None and col.max is not None:
        drift.count(OUT_OF_RANGE, col.name, (x < col.min) | (x > col.max))
    if col.log:
        x = np.log1p(np.maximum(x, 0.0))
    if col.lo is not None and col.hi is not None:
        x = np.clip(x, col.lo, col.hi)
    z = (x - col.center) / col.scale
    return np.clip(z, -col.limit, col.limit), missing


def _take(values: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
    return values if rows is None else values[rows]


def _codes(
    cat: Categorical, col: RawColumn, what: str, drift: Drift, rows: np.ndarray | None = None
) -> np.ndarray:
    """The model's codes of categorical column `col` (of its rows `rows`)."""
    assert col.codes is not None and col.words is not None  # read as text: `read_raw`
    if cat.vocabulary is None:  # mode none: integer codes as the file holds them
        codes = col.integer_codes()
        bad = codes >= cat.cardinality
        if bad.any():
            row = int(np.argmax(bad))
            raise DataError(
                f"{what}: categorical column '{cat.name}' has code {int(codes[row])} at "
                f"{col.where_row(row)}, but the model was trained on codes "
                f"0..{cat.cardinality - 1} and has no unknown bucket (preprocess: none); map "
                "unseen values to a trained code, or train with the default preprocessing",
                public=f"{what}: a categorical column holds a code the model was not trained "
                "on (it has no unknown bucket)",
            )
        return _take(codes, rows)
    index = {w: i + 2 for i, w in enumerate(cat.vocabulary)}
    lookup = np.array([index.get(w, UNKNOWN) for w in col.words], dtype=np.int64)
    held = _take(col.codes, rows)
    out = np.full(len(held), EMPTY, dtype=np.int64)
    present = held >= 0
    out[present] = lookup[held[present]] if len(lookup) else UNKNOWN
    drift.count(UNKNOWN_CATEGORY, cat.name, out == UNKNOWN)
    return out


def _names(names: Iterable[str]) -> str:
    names = list(names)
    shown = ", ".join(f"'{n}'" for n in names[:8])
    return f"{shown}{', ...' if len(names) > 8 else ''}"
