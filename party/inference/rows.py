"""The rows a party scores online with one model, looked up by id.

Where a party looks an id up: in each dataset of its config marked `serve: true` (a
*serving table*), in the order the config lists them, then in the dataset the model was
trained on, as the config names it now. The first that holds the id gives its row: a
serving table holds the live rows, so its row of an id wins over the training table's.
Every party follows this rule over its own tables; the active party drops an id it holds
in none (`unknown_id`), a passive party scores a row of zeros for it (`not_at_peer`).

Each table is a `RowSource` (`party.inference.source`): `find(ids)` gives the model's
inputs of the ids it holds (`Found`), `refreshed(model)` the table as it is now. A table
file (CSV, Parquet, LIBSVM) is `TableRows`: read whole with the model's fitted
preprocessing (`LoadedModel.read`), indexed by id and read again when its file changes
(`file_stamp`). A database dataset (`format: sql`) is `SqlRows`
(`party.inference.sql_rows`): queried for the ids of each micro-batch, never read whole.

A serving table that does not load, or does not fit the model, serves nothing for that
model (`Unreadable`, with a warning) until its file changes (a database's: checked again
`RECHECK_S` later); the other tables serve meanwhile. The training table must load, as
before serving tables existed. A database that fails during a lookup fails the
micro-batch (`TableUnavailable`): a later table cannot stand in for it, since it may hold
an older row of the same id. `Rows.close()` closes the database connections.
"""

from __future__ import annotations

import logging
import operator
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from vfl.contract.spec import TableSource
from vfl.party.datasets import Dataset, resolve_dataset
from vfl.party.errors import DataError, ModelError, PartyError
from vfl.party.inference.model import LoadedModel
from vfl.party.inference.source import Found, Problem, RowSource
from vfl.party.inference.sql_rows import SqlRows
from vfl.party.tables.sql_lookup import LOOKUP_TIMEOUT_S
from vfl.party.training.inputs import Inputs

__all__ = ["Found", "Problem", "RowSource", "Rows", "SqlRows", "TableRows", "serving_table"]

RECHECK_S = 60.0  # a database's serving table that did not fit a model is checked again
log = logging.getLogger(__name__)

# (name, size, mtime in ns, inode) of a file, or of a folder and each file in it (Parquet)
FileStamp = tuple[tuple[str, int, int, int], ...]


def file_stamp(path: str) -> FileStamp | None:
    """What tells a changed table file (or folder of files) from the one read before
    (None: it is not there)."""
    try:
        folder = Path(path)
        files = sorted(f for f in folder.iterdir() if f.is_file()) if folder.is_dir() else []
        return tuple(_stat(f) for f in [folder, *files])
    except OSError:
        return None


def _stat(path: Path) -> tuple[str, int, int, int]:
    st = os.stat(path)
    return path.name, st.st_size, st.st_mtime_ns, st.st_ino


@dataclass(frozen=True)
class TableRows:
    """A dataset's file read whole: the model's inputs and drift counts, by id, and the
    file's stamp when read. `problem`: its file changed since and did not load."""

    dataset: Dataset
    inputs: Inputs
    index: dict[str, int]  # id -> row
    drift: np.ndarray  # per row (rows x `DRIFT_KINDS`)
    stamp: FileStamp | None
    problem: Problem | None = None

    @classmethod
    def read(cls, model: LoadedModel, dataset: Dataset) -> TableRows:
        """Raises:
        DataError: it does not load, or holds an id twice. ModelError: it does not fit
        the model."""
        stamp = file_stamp(dataset.source.path)  # before reading: a change meanwhile shows
        table, inputs, drift = model.read(dataset)
        index = {str(i): r for r, i in enumerate(table.ids)}
        if len(index) != table.rows:
            raise DataError(
                f"dataset '{dataset.name}' holds {table.rows - len(index)} duplicate id(s); "
                "deduplicate its id column to score rows by id"
            )
        return cls(dataset, inputs, index, drift.per_row, stamp)

    @property
    def name(self) -> str:
        return self.dataset.name

    @property
    def rows(self) -> int:
        return len(self.index)

    def find(self, ids: Sequence[str]) -> Found | None:
        held = [i for i in ids if i in self.index]
        if not held:
            return None
        rows = np.array([self.index[i] for i in held], dtype=np.int64)
        return Found(tuple(held), self.inputs.subset(rows), self.drift[rows])

    def none(self) -> Found:
        """No rows (of this table's width)."""
        return Found((), self.inputs.subset(np.zeros(0, dtype=np.int64)), self.drift[:0])

    def close(self) -> None:
        """Nothing to close: the file was read whole."""

    def refreshed(self, model: LoadedModel) -> TableRows:
        """These rows, or the file's rows read again if it changed since: a changed row is
        scored with its new values, a new person is found. A changed file that does not
        load (half written, or no longer fitting the model) leaves these rows, with a
        warning, until it changes again."""
        stamp = file_stamp(self.dataset.source.path)
        if stamp == self.stamp:
            return self
        try:
            rows = TableRows.read(model, self.dataset)
        except PartyError as exc:
            log.warning(
                "model %s: dataset '%s' changed and did not load; scoring its rows read before: %s",
                model.model_id,
                self.name,
                exc,
            )
            problem = Problem.of("its changed file did not load; its rows read before serve", exc)
            return replace(self, stamp=stamp, problem=problem)
        log.info("model %s: dataset '%s' read again, %d rows", model.model_id, self.name, rows.rows)
        return rows


@dataclass(frozen=True)
class Unreadable:
    """A serving table that did not load or fit the model: it serves nothing until its
    file changes (a database's: until `RECHECK_S` after `checked`)."""

    dataset: Dataset
    stamp: FileStamp | None
    problem: Problem
    lookup_timeout_s: float = LOOKUP_TIMEOUT_S
    checked: float = 0.0  # time.monotonic() when it was found so

    @property
    def name(self) -> str:
        return self.dataset.name

    def find(self, ids: Sequence[str]) -> None:
        return None

    def close(self) -> None:
        """Nothing to close."""

    def refreshed(self, model: LoadedModel) -> RowSource:
        if self.dataset.source.format == "sql":
            if time.monotonic() - self.checked < RECHECK_S:
                return self
        elif file_stamp(self.dataset.source.path) == self.stamp:
            return self
        return serving_table(model, self.dataset, self.lookup_timeout_s)


def serving_table(
    model: LoadedModel, dataset: Dataset, lookup_timeout_s: float = LOOKUP_TIMEOUT_S
) -> RowSource:
    """A serving table's rows (a database's: looked up by id, each lookup cut after
    `lookup_timeout_s`); one that does not load or fit the model is `Unreadable`, with a
    warning naming the problem."""
    if dataset.source.format == "sql":
        try:
            return SqlRows.open(model, dataset, lookup_timeout_s)
        except PartyError as exc:
            log.warning(
                "model %s: serving table '%s' is skipped (checked again in %.0f s): %s",
                model.model_id,
                dataset.name,
                RECHECK_S,
                exc,
            )
            problem = Problem.of(f"skipped, checked again every {RECHECK_S:.0f} s", exc)
            return Unreadable(dataset, None, problem, lookup_timeout_s, time.monotonic())
    stamp = file_stamp(dataset.source.path)
    try:
        return TableRows.read(model, dataset)
    except PartyError as exc:
        log.warning(
            "model %s: serving table '%s' is skipped until its file changes: %s",
            model.model_id,
            dataset.name,
            exc,
        )
        return Unreadable(dataset, stamp, Problem.of("skipped until its file changes", exc))


def training_table(
    model: LoadedModel, dataset: Dataset, lookup_timeout_s: float = LOOKUP_TIMEOUT_S
) -> TableRows | SqlRows:
    """The table `model` was trained on, as it is now: its file read whole, or its
    database looked up by id.

    Raises:
        DataError, ModelError: it does not load, or does not fit the model.
        ConfigError: a database's driver is not installed, or its url cannot be read.
    """
    if dataset.source.format == "sql":
        return SqlRows.open(model, dataset, lookup_timeout_s)
    return TableRows.read(model, dataset)


@dataclass(frozen=True)
class Rows:
    """A party's tables for online scoring with one model: its serving tables, in the
    config's order, then the model's training table (whose inputs also build the scorer
    and shape an empty answer)."""

    serving: tuple[RowSource, ...]
    training: TableRows | SqlRows

    @classmethod
    def load(
        cls,
        model: LoadedModel,
        datasets: dict[str, TableSource],
        lookup_timeout_s: float = LOOKUP_TIMEOUT_S,
    ) -> Rows:
        """This party's tables for `model`, by its own config's `datasets` now: the dataset
        the model was trained on and every dataset marked `serve: true` (those that do not
        load or fit the model are skipped, with a warning). A database's lookups are cut
        after `lookup_timeout_s` (its statement timeout).

        Raises:
            JobError: the party no longer exposes the training dataset. DataError,
                ModelError: the training table does not load, or does not fit the model.
            ConfigError: the training table's database driver is missing.
        """
        me = model.manifest.party_id
        trained_on = resolve_dataset(model.spec, me, datasets)
        if trained_on is None:
            raise ModelError(f"model {model.model_id} names no dataset for party '{me}'")
        training = training_table(model, trained_on, lookup_timeout_s)
        serving = tuple(
            serving_table(model, Dataset(name, source), lookup_timeout_s)
            for name, source in datasets.items()
            if source.serve and name != trained_on.name
        )
        if serving:
            names = ", ".join(f"'{s.name}'" for s in serving)
            log.info(
                "model %s: party %s looks ids up in %s, then '%s'",
                model.model_id,
                me,
                names,
                training.name,
            )
        return cls(serving, training)

    @property
    def inputs(self) -> Inputs:
        """The training table's inputs (what a scorer is built with; a database's: no
        rows, the model's width)."""
        return self.training.inputs

    def none(self) -> Found:
        """No rows (of the model's width)."""
        return self.training.none()

    def close(self) -> None:
        """Close each table's database connections (these tables serve no more)."""
        for source in (*self.serving, self.training):
            source.close()

    def refreshed(self, model: LoadedModel) -> Rows:
        """These tables, each read again if its file changed (`TableRows.refreshed`); a
        database's as they are (each lookup reads it as it is now)."""
        serving = tuple(s.refreshed(model) for s in self.serving)
        training = self.training.refreshed(model)
        if training is self.training and all(map(operator.is_, serving, self.serving)):
            return self
        return Rows(serving, training)

    def problems(self) -> dict[str, Problem]:
        """Why, per table that serves nothing or only rows older than its file."""
        every = (*self.serving, self.training)
        return {s.name: s.problem for s in every if s.problem is not None}

    def find(self, ids: Sequence[str]) -> Found:
        """The rows of `ids` that some table holds, each from the first table that holds
        it, in the order of `ids` (an id asked twice is found once).

        Raises:
            TableUnavailable: a database's lookup failed (the micro-batch cannot be told).
        """
        missing = list(dict.fromkeys(ids))
        parts: list[Found] = []
        for source in (*self.serving, self.training):
            found = source.find(missing) if missing else None
            if found is not None:
                parts.append(found)
                held = set(found.ids)
                missing = [i for i in missing if i not in held]
        if not parts:
            return self.training.none()
        if len(parts) == 1:
            return parts[0]
        every = _stack(parts)
        at = {i: r for r, i in enumerate(every.ids)}
        return every.take(np.array([at[i] for i in dict.fromkeys(ids) if i in at], np.int64))


def _stack(parts: list[Found]) -> Found:
    """The rows of `parts`, one after the other."""
    inputs = [p.inputs for p in parts]
    if any(i.sparse for i in inputs):
        x: np.ndarray | sp.csr_matrix = sp.vstack([i.x for i in inputs], format="csr")
    else:
        x = np.vstack([i.x for i in inputs])
    cats = [i.cat.numpy() for i in inputs if i.cat is not None]
    cat = np.vstack(cats) if cats else None
    return Found(
        tuple(i for p in parts for i in p.ids),
        Inputs(x, cat, inputs[0].cardinalities),
        np.vstack([p.drift for p in parts]),
    )
