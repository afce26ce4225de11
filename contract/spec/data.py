"""Where a party's rows come from.

One description of a table, `TableSource` (path, format, id, label, categorical), is both
a party config's `datasets:` entry and, made from a job's `data: {path: ...}`, what
`vfl run` hands its parties. A job's `DataSpec` names a dataset the party exposes (its
column settings then override the dataset's) or, for `vfl run` only, a file.

Only a party config marks a dataset `serve: true` (a table online scoring looks ids up
in), and only a party config has a dataset of `format: sql`: a query's rows in a
PostgreSQL database (`url`, `query` or `table`, and where the password is: `password_env`
or `password_file`). A job spec (`DataSpec`) cannot name a database, a query or a
credential, so neither the coordinator nor another party ever sees them.
"""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

from pydantic import Field, model_validator
from vfl.contract.spec.fields import FieldProblem, Label, SpecModel, Text

FileFormat = Literal["csv", "parquet", "libsvm"]
Format = Literal["csv", "parquet", "libsvm", "sql"]  # sql: a party config's dataset only
SQL_FIELDS = ("url", "query", "table", "password_env", "password_file")
Preprocess = Literal["auto", "zscore", "none"]
ColumnType = Literal["numeric", "categorical", "ignore"]


class TableColumns(SpecModel):
    """How to read a table; a field left out (None) takes the dataset's setting or default."""

    format: Format | None = Field(
        None,
        description="csv (a header row, the default but for a path ending in .parquet or .pq), "
        "parquet (a file or a folder of "
        ".parquet files), libsvm, or (a party config's dataset only) sql: a query's rows "
        "in a PostgreSQL database",
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


# a file named so is Parquet unless its `format` says otherwise
PARQUET_SUFFIXES = {"parquet": "parquet", "pq": "parquet"}


class TableSource(TableColumns):
    """A table a party reads: a party config's `datasets:` entry. Validation fills in the
    defaults: csv, id column 'id' (libsvm: 'auto'), no categorical columns.

    A file (csv, parquet, libsvm) is named by `path`. A `format: sql` table is the rows of
    `query` (or of the whole `table`) in the PostgreSQL database at `url`, which holds no
    password: the password is read, when the party connects, from the environment variable
    `password_env` or the file `password_file` (neither: the server needs none).
    """

    path: str = Field(
        "",
        description="the file (csv, parquet, libsvm); relative paths resolve against the "
        "config's folder",
    )
    url: Text | None = Field(
        None,
        description="sql: the database, postgresql://USER@HOST:PORT/DATABASE (never a "
        "password: see password_env, password_file)",
    )
    query: Text | None = Field(None, description="sql: the SELECT whose rows are the table")
    table: Text | None = Field(
        None, description="sql: a table (or schema.table) read whole, instead of a query"
    )
    password_env: Text | None = Field(
        None, description="sql: the party daemon's environment variable holding the password"
    )
    password_file: Text | None = Field(
        None,
        description="sql: a file holding the password (its first line); relative paths "
        "resolve against the config's folder",
    )
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
        suffix = str(data.get("path", "")).lower().rsplit(".", 1)[-1]
        fmt = data.setdefault("format", PARQUET_SUFFIXES.get(suffix, "csv"))
        data.setdefault("id", "auto" if fmt == "libsvm" else "id")
        data.setdefault("categorical", ())
        data.setdefault("columns", {})
        data.setdefault("preprocess", "auto")
        return data

    @model_validator(mode="after")
    def _one_kind(self) -> TableSource:
        if self.format != "sql":
            for name in SQL_FIELDS:
                if getattr(self, name) is not None:
                    raise FieldProblem(name, f"is for format: sql, not {self.format}")
            if not self.path:
                raise FieldProblem("path", f"is required: the {self.format} file")
            return self
        if self.path:
            raise FieldProblem("path", "is for files: a sql dataset reads 'url' and 'query'")
        if self.url is None:
            raise FieldProblem("url", "is required with format: sql (postgresql://USER@HOST/DB)")
        _check_url(self.url)
        if (self.query is None) == (self.table is None):
            raise FieldProblem("query", "or 'table' is needed with format: sql (exactly one)")
        if self.password_env is not None and self.password_file is not None:
            raise FieldProblem("password_env", "or 'password_file' names the password, not both")
        return self


def _check_url(url: str) -> None:
    """Raises:
    FieldProblem: not a postgresql:// url, or one holding a password (the message never
        repeats the url: it would show the password)."""
    try:
        parts = urlsplit(url)
        secret = parts.password is not None or "password" in parse_qs(parts.query)
    except ValueError:
        raise FieldProblem("url", "is not a url: postgresql://USER@HOST:PORT/DATABASE") from None
    if parts.scheme not in ("postgresql", "postgres"):
        raise FieldProblem("url", "must start with postgresql:// (PostgreSQL is supported)")
    if secret:
        raise FieldProblem(
            "url",
            "holds a password; remove it from the url and use the credential setting: "
            "password_env: VARIABLE (an environment variable of the party daemon) or "
            "password_file: FILE",
        )


class DataSpec(TableColumns):
    """A party's rows in a job: `dataset` (a name the party's config exposes) or `path` (a
    file, only for `vfl run`), optionally with separate test rows to validate on. It never
    names a database: a sql dataset is a party config's (see the module docstring)."""

    format: FileFormat | None = Field(
        None,
        description="csv (a header row, the default but for a path ending in .parquet or .pq), "
        "parquet (a file or a folder of "
        ".parquet files) or libsvm",
    )
    dataset: Text | None = Field(None, description="a dataset the party's config exposes")
    path: Text | None = Field(None, description="a file (only `vfl run`; daemons refuse it)")
    test_dataset: Text | None = Field(
        None, description="held-out rows to validate on instead of validation.fraction"
    )
    test_path: Text | None = Field(None, description="test rows by path (only `vfl run`)")

    @model_validator(mode="before")
    @classmethod
    def _no_database(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        named = [k for k in SQL_FIELDS if k in data]
        if data.get("format") == "sql" or named:
            raise FieldProblem(
                named[0] if named else "format",
                "cannot be in a job spec: a database, its query and its credential belong "
                "in the party's config (a dataset with format: sql), and the job names that "
                "dataset with data: {dataset: NAME}. `vfl run` takes files only: for a sql "
                "dataset run the party daemons (`vfl party serve`), or start them with "
                "vfl.local_federation",
            )
        return data

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
