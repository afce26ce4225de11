"""One column's fitted preprocessing, and how it turns the column's raw cells into model
inputs: `Numeric` (impute, log, clip, z-score), `Categorical` (a vocabulary, or the
file's own integer codes), `Ignored`, and `SparseScales` (a LIBSVM table's divisors).
Pydantic models, kept as JSON in the model part (never pickle).
"""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from vfl.party.errors import DataError
from vfl.party.tables.preprocess.drift import (
    OUT_OF_RANGE,
    UNEXPECTED_MISSING,
    UNKNOWN_CATEGORY,
    Drift,
)
from vfl.party.tables.table import RawColumn

Z_LIMIT = 8.0  # |input| after preprocessing (auto, zscore)
UNKNOWN, EMPTY = 0, 1  # the codes of a category never fitted and of an empty cell
MISSING_SUFFIX = " (missing)"


class Fitted(BaseModel):
    """A fitted part of a preprocessing: frozen, no unknown fields (read back from JSON)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Numeric(Fitted):
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


class Categorical(Fitted):
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


class Ignored(Fitted):
    name: str
    kind: Literal["ignore"] = "ignore"


Column = Annotated[Numeric | Categorical | Ignored, Field(discriminator="kind")]


class SparseScales(Fitted):
    """A LIBSVM table's columns (by index name) and the divisor of each (values beyond
    +-`Z_LIMIT` after it are clipped and counted as out of range)."""

    names: tuple[str, ...]
    scales: tuple[float, ...]


def numeric_inputs(col: Numeric, values: np.ndarray, drift: Drift) -> tuple[np.ndarray, np.ndarray]:
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


def category_codes(
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
        return take(codes, rows)
    index = {w: i + 2 for i, w in enumerate(cat.vocabulary)}
    lookup = np.array([index.get(w, UNKNOWN) for w in col.words], dtype=np.int64)
    held = take(col.codes, rows)
    out = np.full(len(held), EMPTY, dtype=np.int64)
    present = held >= 0
    out[present] = lookup[held[present]] if len(lookup) else UNKNOWN
    drift.count(UNKNOWN_CATEGORY, cat.name, out == UNKNOWN)
    return out


def take(values: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
    """`values` at rows `rows`, in that order (None: every row, not copied)."""
    return values if rows is None else values[rows]
