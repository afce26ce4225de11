"""The rows a party scores online with one model, looked up by id.

Where a party looks an id up: in each dataset of its config marked `serve: true` (a
*serving table*), in the order the config lists them, then in the dataset the model was
trained on, as the config names it now. The first that holds the id gives its row: a
serving table holds the live rows, so its row of an id wins over the training table's.
Every party follows this rule over its own tables; the active party drops an id it holds
in none (`unknown_id`), a passive party scores a row of zeros for it (`not_at_peer`).

A `RowSource` is one such table: `find(ids)` gives the model's inputs of the ids it holds
(`Found`), `refreshed(model)` the table as it is now. `TableRows` is a table file (CSV,
Parquet, LIBSVM) read whole with the model's fitted preprocessing (`LoadedModel.read`),
indexed by id and read again when its file changes (`file_stamp`). A source queried by
id instead (a database) would fetch the raw rows of the ids it is asked for, preprocess
them with `LoadedModel.prepare` and give them as `Found.of`.

A serving table that does not load, or does not fit the model, serves nothing for that
model (`Unreadable`, with a warning) until its file changes; the other tables serve
meanwhile. The training table must load, as before serving tables existed.
"""

from __future__ import annotations

import logging
import operator
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

import numpy as np
import scipy.sparse as sp
from vfl.contract.spec import TableSource
from vfl.party.data import Table
from vfl.party.errors import DataError, ModelError, PartyError
from vfl.party.inference.model import LoadedModel
from vfl.party.job import Dataset, resolve_dataset
from vfl.party.preprocess import DRIFT_KINDS, Drift
from vfl.party.training.models import Inputs

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
class Found:
    """The rows a source holds of some ids: those ids (in the order asked), their model
    inputs and their drift counts (rows x `DRIFT_KINDS`), row for row."""

    ids: tuple[str, ...]
    inputs: Inputs
    drift: np.ndarray

    @classmethod
    def of(cls, table: Table, inputs: Inputs, drift: Drift) -> Found:
        """Rows as `LoadedModel.prepare` gives them."""
        return cls(tuple(str(i) for i in table.ids), inputs, drift.per_row)

    def take(self, rows: np.ndarray) -> Found:
        """These `rows` (positions), in that order."""
        return Found(tuple(self.ids[r] for r in rows), self.inputs.subset(rows), self.drift[rows])

    def drift_counts(self) -> dict[str, int]:
        return {k: int(v) for k, v in zip(DRIFT_KINDS, self.drift.sum(axis=0), strict=True)}

    def padded(self, ids: Sequence[str]) -> tuple[Inputs, np.ndarray]:
        """One row per id of `ids`: its row here, or a row of zeros (what a passive party
        scores for an id it lacks); and the positions of the ids not found."""
        at = {i: r for r, i in enumerate(self.ids)}
        zero = len(self.ids)
        rows = np.array([at.get(i, zero) for i in ids], dtype=np.int64)
        return self.inputs.with_zero_row().subset(rows), np.flatnonzero(rows == zero)


@dataclass(frozen=True)
class Problem:
    """Why a table serves nothing, or only rows older than its file: `text` for this
    party's log and operator, `public` (no path, column or value) for the coordinator."""

    text: str
    public: str

    @classmethod
    def of(cls, what: str, exc: PartyError) -> Problem:
        return cls(f"{what}: {exc}", f"{what}: {exc.public}")

    def __str__(self) -> str:
        return self.text


class RowSource(Protocol):
    """A table online scoring looks ids up in (the module docstring)."""

    @property
    def name(self) -> str:
        """The dataset's name in the party config."""
        ...

    @property
    def problem(self) -> Problem | None:
        """Why it serves nothing, or only rows older than its file (None: neither)."""
        ...

    def find(self, ids: Sequence[str]) -> Found | None:
        """The rows it holds of `ids` (None: none of them)."""
        ...

    def refreshed(self, model: LoadedModel) -> RowSource:
        """This source as it is now (a table file read again if it changed)."""
        ...


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
    file changes."""

    dataset: Dataset
    stamp: FileStamp | None
    problem: Problem

    @property
    def name(self) -> str:
        return self.dataset.name

    def find(self, ids: Sequence[str]) -> None:
        return None

    def refreshed(self, model: LoadedModel) -> RowSource:
        if file_stamp(self.dataset.source.path) == self.stamp:
            return self
        return serving_table(model, self.dataset)


def serving_table(model: LoadedModel, dataset: Dataset) -> RowSource:
    """A serving table's rows; one that does not load or fit the model is `Unreadable`,
    with a warning naming the problem. (Another kind of source, such as a database
    queried by id, would be chosen here by the dataset's format.)"""
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


@dataclass(frozen=True)
class Rows:
    """A party's tables for online scoring with one model: its serving tables, in the
    config's order, then the model's training table (whose inputs also build the scorer
    and shape an empty answer)."""

    serving: tuple[RowSource, ...]
    training: TableRows

    @classmethod
    def load(cls, model: LoadedModel, datasets: dict[str, TableSource]) -> Rows:
        """This party's tables for `model`, by its own config's `datasets` now: the dataset
        the model was trained on and every dataset marked `serve: true` (those that do not
        load or fit the model are skipped, with a warning).

        Raises:
            JobError: the party no longer exposes the training dataset. DataError,
                ModelError: the training table does not load, or does not fit the model.
        """
        me = model.manifest.party_id
        trained_on = resolve_dataset(model.spec, me, datasets)
        if trained_on is None:
            raise ModelError(f"model {model.model_id} names no dataset for party '{me}'")
        training = TableRows.read(model, trained_on)
        serving = tuple(
            serving_table(model, Dataset(name, source))
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
        """The training table's inputs (what a scorer is built with)."""
        return self.training.inputs

    def refreshed(self, model: LoadedModel) -> Rows:
        """These tables, each read again if its file changed (`TableRows.refreshed`)."""
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
        it, in the order of `ids` (an id asked twice is found once)."""
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
