"""Drift: what applying a fitted preprocessing (`Preprocessor.apply`) counts.

Per column, values outside the fitted range, categories that fall into the unknown
bucket and empty cells in a column that had none in training; per row, how many cells of
each kind. These are not errors (a missing or extra column, or a numeric column that now
holds words, is); the counts are logged at the party and kept with a served model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

DRIFT_KINDS = ("out_of_range", "unknown_categories", "unexpected_missing")
OUT_OF_RANGE, UNKNOWN_CATEGORY, UNEXPECTED_MISSING = range(3)


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
