"""A party's fitted preprocessing of one dataset (`Preprocessor`), kept with its model
part and applied identically in training, validation, batch prediction and online
scoring.

`Preprocessor.apply(raw)` turns any `RawTable` of the fitted columns into the model's
inputs (a `Table`) and counts drift (`party.tables.preprocess.drift`). A dense table's
columns go through their fitted transforms (`party.tables.preprocess.fitted`); a LIBSVM
(sparse) table's columns are divided by their scales and stay sparse. A `Preprocessor` is
JSON (pydantic), never pickle.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated

import numpy as np
import scipy.sparse as sp
from pydantic import Field
from vfl.contract.spec.data import Preprocess
from vfl.party.errors import DataError
from vfl.party.tables.preprocess.bins import Binned, binned_codes
from vfl.party.tables.preprocess.drift import OUT_OF_RANGE, Drift
from vfl.party.tables.preprocess.fitted import (
    MISSING_SUFFIX,
    Z_LIMIT,
    Categorical,
    Fitted,
    Ignored,
    Numeric,
    SparseScales,
    category_codes,
    numeric_inputs,
    take,
)
from vfl.party.tables.table import RawTable, Table, with_columns

Column = Annotated[Numeric | Categorical | Ignored | Binned, Field(discriminator="kind")]


class Preprocessor(Fitted):
    """One party's fitted preprocessing of one dataset's columns."""

    mode: Preprocess
    columns: tuple[Column, ...] = ()
    sparse: SparseScales | None = None

    def kinds(self) -> dict[str, str]:
        """column name -> numeric | categorical | ignore, as fitted (a dense table; a
        binned column is read as numeric)."""
        return {c.name: "numeric" if c.kind == "binned" else c.kind for c in self.columns}

    @property
    def numeric(self) -> tuple[Numeric, ...]:
        return tuple(c for c in self.columns if isinstance(c, Numeric))

    @property
    def binned(self) -> tuple[Binned, ...]:
        """The numeric columns cut into bins (a tree model's)."""
        return tuple(c for c in self.columns if isinstance(c, Binned))

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
        one-hot columns of small vocabularies, the binned columns' codes."""
        if self.sparse is not None:
            return self.sparse.names
        nums = self.numeric
        names = [c.name for c in nums] + [c.name + MISSING_SUFFIX for c in nums if c.indicator]
        one_hot = [n for c in self.categorical if c.one_hot for n in c.one_hot_names]
        return tuple(names + one_hot + [c.name for c in self.binned])

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
            feats[:, j], missing = numeric_inputs(col, take(values, rows), drift)
            if col.indicator:
                feats[:, k] = missing
                k += 1
            if consume:
                del values
                raw.release(col.name)
        for cat in self.categorical:
            if cat.one_hot:
                codes_of = category_codes(cat, raw.column(cat.name), what, drift, rows)
                feats[np.arange(n), k + codes_of] = 1.0
                k += cat.cardinality
                if consume:
                    raw.release(cat.name)
        for binned in self.binned:
            values = raw.column(binned.name).values
            assert values is not None  # _check_columns
            feats[:, k] = binned_codes(binned, take(values, rows), drift)
            k += 1
            if consume:
                del values
                raw.release(binned.name)
        cats = self.embedded
        codes = np.empty((n, len(cats)), dtype=np.int64) if cats else None
        for j, cat in enumerate(cats):
            assert codes is not None
            codes[:, j] = category_codes(cat, raw.column(cat.name), what, drift, rows)
            if consume:
                raw.release(cat.name)
        table = Table(
            take(raw.ids, rows),
            feats,
            None if raw.labels is None else take(raw.labels, rows),
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
        numbers: tuple[Numeric | Binned, ...] = (*self.numeric, *self.binned)
        for col in numbers:
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


def _names(names: Iterable[str]) -> str:
    names = list(names)
    shown = ", ".join(f"'{n}'" for n in names[:8])
    return f"{shown}{', ...' if len(names) > 8 else ''}"
