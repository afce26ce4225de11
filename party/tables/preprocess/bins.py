"""Bins: the preprocessing of a tree model (`model: {trees: {bins: B}}`), fitted on the
party's own training rows, kept with its model part and applied identically wherever the
model scores. Bins never leave the party: its peers see only split ids and which rows go
left (docs/protocols.md, "Gradient-boosted trees").

    numbers   `Binned`: code 0 is an empty cell; codes 1..len(edges)+1 are quantile bins
              of the training rows' values (at most B), cut halfway between distinct
              values, so a value that fills more than 1/B of the rows is a bin of its own
              and a column of few values has one bin per value
    words     `Categorical` (`fitted`): its B - 1 most frequent words seen at least
              `MIN_COUNT` times as codes 2..B, code 1 an empty cell, code 0 every other
              word (rare in training, or never seen)

So every code fits a byte (B <= 255). Drift is counted as for the other modes: values
outside the training range, words never kept, empty cells in a column that had none.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from vfl.party.tables.preprocess.drift import OUT_OF_RANGE, UNEXPECTED_MISSING, Drift
from vfl.party.tables.preprocess.fitted import Categorical, Fitted, Ignored
from vfl.party.tables.table import RawColumn, RawTable

MIN_COUNT = 2  # a word seen fewer times in training shares the bin of unknown words
EMPTY_BIN = 0  # a numeric column's code of an empty cell


class Binned(Fitted):
    """A numeric column as quantile bins: code 0 an empty cell, code 1 + the number of
    `edges` below the value otherwise (`edges` ascending: the upper bounds of bins 1..)."""

    name: str
    kind: Literal["binned"] = "binned"
    edges: tuple[float, ...] = ()
    missing: bool = False  # the training rows had empty cells
    min: float | None = None  # the training rows' range of values (drift)
    max: float | None = None

    @property
    def bins(self) -> int:
        """Codes this column takes: the empty cell's and one per bin."""
        return len(self.edges) + 2


def fit_binned(name: str, values: np.ndarray, bins: int) -> Binned | Ignored:
    """Column `name`'s bins over its training `values` (NaN: an empty cell)."""
    x = values.astype(np.float64)
    missing = np.isnan(x)
    present = x[~missing & np.isfinite(x)]
    if not len(present):
        return Ignored(name=name)  # nothing to split on
    distinct, counts = np.unique(present, return_counts=True)
    if len(distinct) <= bins:
        cut = np.arange(len(distinct) - 1)
    else:
        cum = np.cumsum(counts)
        targets = cum[-1] * np.arange(1, bins) / bins
        cut = np.unique(np.searchsorted(cum, targets, side="left"))
        cut = cut[cut < len(distinct) - 1]  # a bin after the largest value would be empty
    edges = (distinct[cut] + distinct[cut + 1]) / 2
    return Binned(
        name=name,
        edges=tuple(float(e) for e in edges),
        missing=bool(missing.any()),
        min=float(distinct[0]),
        max=float(distinct[-1]),
    )


def binned_codes(col: Binned, values: np.ndarray, drift: Drift) -> np.ndarray:
    """The bin codes (float32, for the model's input matrix) of `values`."""
    x = values.astype(np.float64)
    missing = np.isnan(x)
    if missing.any() and not col.missing:
        drift.count(UNEXPECTED_MISSING, col.name, missing)
    if col.min is not None and col.max is not None:
        drift.count(OUT_OF_RANGE, col.name, (x < col.min) | (x > col.max))
    codes = 1 + np.searchsorted(np.asarray(col.edges, dtype=np.float64), x, side="left")
    codes[missing] = EMPTY_BIN
    return codes.astype(np.float32)


def top_words(col: RawColumn, rows: np.ndarray | None, limit: int) -> tuple[str, ...]:
    """The `limit` most frequent words of text column `col` over its rows `rows` (None:
    all) among those seen at least `MIN_COUNT` times, most frequent first (ties by word)."""
    assert col.codes is not None and col.words is not None
    words = col.words
    codes = col.codes if rows is None else col.codes[rows]
    counts = np.bincount(codes[codes >= 0], minlength=len(words))
    order = sorted(
        (i for i in range(len(words)) if counts[i] >= MIN_COUNT),
        key=lambda i: (-counts[i], words[i]),
    )[:limit]
    return tuple(words[i] for i in order)


def fit_bins(
    raw: RawTable, rows: np.ndarray | None, bins: int
) -> tuple[Binned | Categorical | Ignored, ...]:
    """Every column of dense table `raw` fitted as at most `bins` bins on its rows `rows`
    (None: all). The dataset's `preprocess:` mode changes nothing here: a tree splits on
    the order of values, not on their scale."""
    columns: list[Binned | Categorical | Ignored] = []
    for col in raw.columns:
        if col.ignored:
            columns.append(Ignored(name=col.name))
        elif col.values is not None:
            values = col.values if rows is None else col.values[rows]
            columns.append(fit_binned(col.name, values, bins))
        else:
            vocabulary = top_words(col, rows, bins - 1)
            columns.append(
                Categorical(name=col.name, vocabulary=vocabulary, cardinality=len(vocabulary) + 2)
            )
    return tuple(columns)
