"""Helpers of the bucket-sum tests: values on the layout's grid and the plaintext oracle."""

from __future__ import annotations

import numpy as np
from vfl.secure.histograms import Bins, Layout


def grid_values(
    rng: np.random.Generator, rows: int, layout: Layout, scale: float = 1.0
) -> np.ndarray:
    """Reals on the layout's fixed-point grid (so float sums are exact), negatives
    included, with |x| <= scale * the bound."""
    largest = int(layout.largest * scale)
    ints = rng.integers(-largest, largest + 1, size=(rows, layout.values))
    return ints * 2.0**-layout.scale_bits


def plain_sums(values: np.ndarray, bins: Bins, select: np.ndarray | None = None) -> np.ndarray:
    """The sum per bucket (column-major, bin by bin) of the selected rows' values."""
    rows = np.arange(values.shape[0]) if select is None else np.asarray(select)
    out = np.zeros((bins.total, values.shape[1]))
    for column, offset in enumerate(bins.offsets):
        np.add.at(out, offset + bins.codes[rows, column].astype(np.int64), values[rows])
    return out


def random_bins(
    rng: np.random.Generator, rows: int, counts: tuple[int, ...], used: int = 0
) -> Bins:
    """Codes uniform over each column's bins (over its first `used` bins when given, so
    the others stay empty)."""
    codes = np.stack([rng.integers(0, used or c, size=rows) for c in counts], axis=1)
    return Bins(codes, counts)
