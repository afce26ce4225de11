"""A party's WOE bins of its own columns, fitted on the rows analysed, with every row's bin.

The bins are the trees' (`party.tables.preprocess.bins.fit_bins`): a numeric column's
quantile bins, cut halfway between distinct values and right-closed (bin i holds the
values in (edges[i-1], edges[i]], the first from -inf, the last to +inf), a categorical
column's most frequent words seen at least twice, then one bin of every other word (rare
in these rows, or never seen); an empty cell is a bin of its own, last, when the rows
hold one. The order here is the order of the output (`ColumnBins.codes`), not the trees'
codes (their empty cell is code 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from vfl.party.errors import DataError
from vfl.party.tables.preprocess.bins import Binned, binned_codes, fit_bins
from vfl.party.tables.preprocess.drift import Drift
from vfl.party.tables.preprocess.fitted import EMPTY, UNKNOWN, Categorical, category_codes
from vfl.party.tables.table import RawTable

ONE_VALUE = "one distinct value"
ALL_EMPTY = "every cell is empty"


@dataclass(frozen=True)
class ColumnBins:
    """One column's bins and the bin (in output order) of every row analysed."""

    name: str
    categorical: bool
    edges: tuple[float, ...]
    categories: tuple[str, ...]
    empty: bool  # the last bin holds the empty cells
    codes: np.ndarray  # int64, one per row analysed, in [0, count)
    note: str = ""

    @property
    def count(self) -> int:
        """Bins of this column."""
        ordered = len(self.categories) + 1 if self.categorical else len(self.edges) + 1
        return ordered + int(self.empty)

    @property
    def ordered(self) -> int:
        """Bins before the empty-cell bin (those `binning: monotone` may merge)."""
        return self.count - int(self.empty)

    def with_starts(self, starts: list[int]) -> ColumnBins:
        """This numeric column with its ordered bins merged into groups beginning at
        `starts` (the empty-cell bin stays last and alone)."""
        group = np.zeros(self.count, dtype=np.int64)
        for g, s in enumerate(starts):
            group[s:] = g
        if self.empty:
            group[-1] = len(starts)
        edges = tuple(self.edges[s - 1] for s in starts[1:])
        return ColumnBins(self.name, False, edges, (), self.empty, group[self.codes], self.note)


def column_bins(raw: RawTable, rows: np.ndarray, bins: int, party_id: str) -> list[ColumnBins]:
    """The WOE bins of every column of `raw` but the ignored ones, fitted on its rows
    `rows` (positions in `raw`, in the order analysed), with those rows' bins.

    Raises:
        DataError: the table is a LIBSVM one (its columns are not binned here).
    """
    if raw.sparse is not None:
        message = (
            f"party '{party_id}': dataset '{raw.name}' is a LIBSVM table; WOE and IV take "
            "CSV or Parquet tables"
        )
        raise DataError(message, public=message)
    fitted = fit_bins(raw, rows, bins)
    out: list[ColumnBins] = []
    for col, fit in zip(raw.columns, fitted, strict=True):
        if col.ignored:
            continue
        if isinstance(fit, Categorical):
            out.append(_categorical(fit, raw, rows))
        elif isinstance(fit, Binned):
            assert col.values is not None
            out.append(_numeric(fit, col.values[rows]))
        else:  # a numeric column without a value in these rows
            codes = np.ones(len(rows), dtype=np.int64)
            out.append(ColumnBins(col.name, False, (), (), True, codes, ALL_EMPTY))
    return out


def _numeric(fit: Binned, values: np.ndarray) -> ColumnBins:
    trees = binned_codes(fit, values, Drift(by_row=False)).astype(np.int64)  # 0: empty, 1..: bins
    ordered = len(fit.edges) + 1
    codes = np.where(trees == 0, ordered, trees - 1)
    # (one value beside empty cells still informs: present against empty)
    note = ONE_VALUE if not fit.edges and not fit.missing else ""
    return ColumnBins(fit.name, False, fit.edges, (), fit.missing, codes, note)


def _categorical(fit: Categorical, raw: RawTable, rows: np.ndarray) -> ColumnBins:
    words = fit.vocabulary or ()
    trees = category_codes(fit, raw.column(fit.name), fit.name, Drift(by_row=False), rows)
    other = len(words)
    empty = bool((trees == EMPTY).any())
    codes = np.where(trees == UNKNOWN, other, np.where(trees == EMPTY, other + 1, trees - 2))
    column = raw.column(fit.name)
    assert column.codes is not None
    held = column.codes[rows]
    distinct = len(np.unique(held[held >= 0]))
    note = ALL_EMPTY if distinct == 0 else ONE_VALUE if distinct == 1 and not empty else ""
    return ColumnBins(fit.name, True, (), words, empty, codes.astype(np.int64), note)
