"""Fitting a party's preprocessing on its own training rows (`fit`): the statistics are
the party's own, nothing of them leaves it (the other parties learn the number of input
columns, as they did before).

Modes (a dataset's `preprocess:`):

    auto    numbers: empty cells imputed with the training median (plus a 0/1
            missing-indicator column when the training rows had empty cells), a log
            (log1p) for non-negative columns whose skewness exceeds `LOG_SKEW`, clipped to
            the training quantiles `CLIP_QUANTILE`..1-`CLIP_QUANTILE`, then z-scored;
            0/1 columns stay as they are. Words: categorical, through a vocabulary of the
            values seen at least `bins.MIN_COUNT` times (at most `MAX_CATEGORIES`, the most
            frequent); code 0 is the unknown bucket, 1 an empty cell. A column of at most
            `ONE_HOT_MAX` codes is one-hot (0/1 numeric inputs: cheap in the secure
            MatMul layer), a larger one goes through an embedding (blindfl: the
            Embed-MatMul layer).
    zscore  the same, with plain z-scores (no log, no quantile clip): the comparison.
    none    the features as they are: numbers only, no empty cells, categorical columns
            of integer codes (codes 0..max seen in training).

Every mode but `none` bounds its outputs to +-`Z_LIMIT` (`party.tables.preprocess.fitted`),
so the secure layer of `protocol: blindfl` always holds them; with `none`,
`check_secure_bounds` makes sure the raw values fit it. LIBSVM (sparse) tables keep their
sparsity: a column is divided by its standard deviation (not centred); 0/1 columns stay as
they are.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from vfl.contract.spec.data import Preprocess
from vfl.party.errors import DataError
from vfl.party.tables.preprocess.bins import fit_bins, top_words
from vfl.party.tables.preprocess.fitted import Categorical, Ignored, Numeric, SparseScales
from vfl.party.tables.preprocess.preprocessor import Preprocessor
from vfl.party.tables.table import RawColumn, RawTable

LOG_SKEW = 1.0  # a non-negative column more skewed than this is logged
CLIP_QUANTILE = 0.001
MAX_CATEGORIES = 1000
ONE_HOT_MAX = 16  # a vocabulary of at most this many codes is one-hot, a larger one embedded
SECURE_LIMIT = 64.0  # |feature| the blindfl source layers hold: |Z| < 128 at their fixed point


def fit(
    raw: RawTable, rows: np.ndarray | None, mode: Preprocess, bins: int | None = None
) -> Preprocessor:
    """The preprocessing of `raw` fitted on its rows `rows` (None: every row); with
    `bins`, a tree model's: every column as at most that many bins (`bins.fit_bins`)."""
    if raw.sparse is not None:
        if bins is not None:
            raise DataError(
                f"dataset '{raw.name}' is a LIBSVM table: tree models take CSV or Parquet "
                "tables for now"
            )
        return _fit_sparse(raw, rows, mode)
    if bins is not None:
        return Preprocessor(mode=mode, columns=fit_bins(raw, rows, bins))
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
    vocabulary = top_words(col, rows, MAX_CATEGORIES)
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
