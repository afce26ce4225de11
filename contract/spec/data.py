"""Where a party's rows come from.

One description of a table file, `TableSource` (path, format, id, label, categorical), is
both a party config's `datasets:` entry and, made from a job's `data: {path: ...}`, what
`vfl run` hands its parties. Only a party config marks a dataset `serve: true` (a table
online scoring looks ids up in); a job's `data:` has no such field. A job's `DataSpec`
names a dataset the party exposes (its column settings then override the dataset's) or,
for `vfl run` only, a file.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator
from vfl.contract.spec.fields import Label, SpecModel, Text

Format = Literal["csv", "parquet", "libsvm"]
Preprocess = Literal["auto", "zscore", "none"]
ColumnType = Literal["numeric", "categorical", "ignore"]


class TableColumns(SpecModel):
    """How to read a table; a field left out (None) takes the dataset's setting or default."""

    format: Format | None = Field(
        None,
        description="csv (a header row, the default), parquet (a file or a folder of "
        ".parquet files) or libsvm",
    )
    id: Text | None = Field(
        None,
        description="csv, parquet: the id column (default 'id'); libsvm: 'auto' (default: a "
        "leading '@7'/'7' token, else the line number), 'line' or 'first'",
    )
    label: Label = Field(
        None,
        description="the label column (active party only); libsvm: any value, e.g. true, "
        "when the file carries a label token",
    )
    categorical: tuple[Text, ...] | None = Field(
        None,
        description="csv or parquet columns to treat as categories, fed through embeddings "
        "(with preprocess: none they must hold integer codes)",
    )
    columns: dict[Text, ColumnType] | None = Field(
        None,
        description="type overrides of csv or parquet columns: numeric, categorical or ignore "
        "(the rest are inferred: numbers are numeric, words categorical)",
    )
    preprocess: Preprocess | None = Field(
        None,
        description="auto (the default): fitted on the party's training rows; numbers "
        "clipped to fitted quantiles, logged when skewed and non-negative, z-scored; empty "
        "cells imputed with a missing-indicator column; words through a vocabulary with an "
        "unknown bucket. zscore: the same with plain z-scores. none: features used as "
        "they are (numbers only, no empty cells)",
    )

    def given(self) -> dict[str, Any]:
        """The column settings given (not None), to override a dataset's or make one."""
        return {
            k: value for k in TableColumns.model_fields if (value := getattr(self, k)) is not None
        }


class TableSource(TableColumns):
    """A table file a party reads: a party config's `datasets:` entry. Validation fills in
    the defaults: csv, id column 'id' (libsvm: 'auto'), no categorical columns."""

    path: Text = Field(description="the file; relative paths resolve against the config's folder")
    serve: bool = Field(
        False,
        description="party config only: online scoring (`vfl score`) also looks ids up in "
        "this table, read with the model's fitted preprocessing and re-read when its file "
        "changes; a serving table's row wins over the training table's row of the same id",
    )

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = {k: v for k, v in data.items() if v is not None}
        fmt = data.setdefault("format", "csv")
        data.setdefault("id", "auto" if fmt == "libsvm" else "id")
        data.setdefault("categorical", ())
        data.setdefault("columns", {})
        data.setdefault("preprocess", "auto")
        return data


class DataSpec(TableColumns):
    """A party's rows in a job: `dataset` (a name the party's config exposes) or `path` (a
    file, only for `vfl run`), optionally with separate test rows to validate on."""

    dataset: Text | None = Field(None, description="a dataset the party's config exposes")
    path: Text | None = Field(None, description="a file (only `vfl run`; daemons refuse it)")
    test_dataset: Text | None = Field(
        None, description="held-out rows to validate on instead of validation.fraction"
    )
    test_path: Text | None = Field(None, description="test rows by path (only `vfl run`)")

    @model_validator(mode="after")
    def _one_source(self) -> DataSpec:
        if (self.dataset is None) == (self.path is None):
            raise ValueError(
                "needs exactly one of 'dataset' (a name the party's config exposes) "
                "or 'path' (a file; only for `vfl run`)"
            )
        if self.test_dataset is not None and self.path is not None:
            raise ValueError("must pair 'dataset' with 'test_dataset', 'path' with 'test_path'")
        if self.test_path is not None and self.dataset is not None:
            raise ValueError("must pair 'dataset' with 'test_dataset', 'path' with 'test_path'")
        return self

    def table(self, test: bool = False) -> TableSource:
        """The file this data names (`path`, or `test_path`) with its column settings.

        Raises:
            ValueError: the data names a dataset, not a file.
        """
        path = self.test_path if test else self.path
        if path is None:
            raise ValueError("this data names a dataset, not a file")
        return TableSource(path=path, **self.given())
