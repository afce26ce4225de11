"""A `format: sql` dataset as a table that online scoring looks ids up in: queried for
the ids of each micro-batch, never snapshotted (`party.tables.sql_lookup`).

`SqlRows.open` checks the query's columns against the model's (the query with `LIMIT
0`): a table that does not fit raises `ModelError` (a serving table is then skipped:
`rows.serving_table`). A database that fails at that moment is no error yet: each lookup
tries it again. `find(ids)` looks the ids up, reads the rows as a snapshot of the same
rows is read (`party.tables.load.raw_rows`: the same column types and kinds) and preprocesses
them with the model's fitted preprocessing (`LoadedModel.prepare`), so a row scores as
`vfl predict` over the same database rows scores it; a row changed in the database is
scored with its new values at the next micro-batch, a person added is found at once. A
dataset's `label` column is not read: scoring needs none, and a new person has none.

A lookup that fails raises `TableUnavailable`, naming the party and the dataset (its
public form, as every error's, without the host or the query), and `problem` says so
until a lookup succeeds. `close()` closes the dataset's connections.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from vfl.party.datasets import Dataset
from vfl.party.errors import ModelError, PartyError, TableUnavailable
from vfl.party.inference.model import LoadedModel
from vfl.party.inference.source import Found, Problem
from vfl.party.tables.load import raw_rows
from vfl.party.tables.sql_lookup import LOOKUP_TIMEOUT_S, Lookup

log = logging.getLogger(__name__)


class SqlRows:
    """Dataset `dataset` (format sql), looked up by id for `model` (a `RowSource`)."""

    def __init__(self, model: LoadedModel, dataset: Dataset, lookup: Lookup) -> None:
        """Raises:
        ModelError: the model was trained on LIBSVM columns."""
        self.model, self.dataset, self.lookup = model, dataset, lookup
        self.label = dataset.source.label
        self.source = dataset.source.model_copy(update={"label": None})
        table, inputs, drift = model.no_rows(dataset.name)
        self.inputs = inputs  # no rows, the model's width: what a scorer is built with
        self._none = Found.of(table, inputs, drift)
        self.problem: Problem | None = None

    @classmethod
    def open(
        cls, model: LoadedModel, dataset: Dataset, timeout_s: float = LOOKUP_TIMEOUT_S
    ) -> SqlRows:
        """Dataset `dataset` for `model`, its columns checked if its database answers
        (`timeout_s`: each lookup's statement timeout).

        Raises:
            ModelError: its columns do not fit the model.
            ConfigError: the driver is not installed, or the url cannot be read.
        """
        lookup = Lookup(dataset.source, dataset.name, timeout_s)
        try:
            rows = cls(model, dataset, lookup)
            rows._check()
        except ModelError:
            lookup.close()
            raise
        return rows

    def _check(self) -> None:
        """Check the query's columns against the model's, if the database answers now.

        Raises:
            ModelError: they do not fit it.
        """
        try:
            columns = self.lookup.describe().column_names
        except PartyError as exc:  # each lookup tries again
            log.warning(
                "model %s: dataset '%s' cannot be checked now, its lookups will try again: %s",
                self.model.model_id,
                self.name,
                exc,
            )
            self.problem = Problem.of("its database failed when the model loaded", exc)
            return
        features = [c for c in columns if c not in (self.source.id, self.label)]
        self.model.no_rows(self.name, features)

    @property
    def name(self) -> str:
        return self.dataset.name

    def find(self, ids: Sequence[str]) -> Found | None:
        """Raises:
        TableUnavailable: the lookup failed, or its rows do not fit the model."""
        try:
            found = self._lookup(ids)
        except PartyError as exc:
            self.problem = Problem.of("its lookups fail", exc)
            me = self.model.manifest.party_id
            raise TableUnavailable(
                f"party '{me}', online scoring: {exc}",
                public=f"party '{me}', online scoring: {exc.public}",
            ) from None
        self.problem = None
        return found

    def _lookup(self, ids: Sequence[str]) -> Found | None:
        data = self.lookup.rows(ids)
        if not data.num_rows:
            return None
        if self.label is not None and self.label in data.column_names:
            data = data.drop_columns([self.label])
        pre = self.model.preprocessor
        raw = raw_rows(data, self.source, self.name, pre.mode, pre.kinds())
        return Found.of(*self.model.prepare(raw))

    def none(self) -> Found:
        """No rows (of the model's width)."""
        return self._none

    def refreshed(self, model: LoadedModel) -> SqlRows:
        """Itself: each lookup reads the database as it is now."""
        return self

    def close(self) -> None:
        self.lookup.close()
