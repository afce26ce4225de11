"""What a table gives online scoring (`party.inference.rows`): a `RowSource` finds the
model inputs of the ids it holds (`Found`), or says why it serves nothing (`Problem`).

Two kinds exist: a table file read whole and indexed by id (`rows.TableRows`), and a
database dataset queried by id at each micro-batch (`sql_rows.SqlRows`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from vfl.party.errors import PartyError
from vfl.party.inference.model import LoadedModel
from vfl.party.tables.preprocess.drift import DRIFT_KINDS, Drift
from vfl.party.tables.table import Table
from vfl.party.training.inputs import Inputs


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
        """The rows it holds of `ids` (None: none of them).

        Raises:
            TableUnavailable: it cannot tell now (a database that fails).
        """
        ...

    def refreshed(self, model: LoadedModel) -> RowSource:
        """This source as it is now (a table file read again if it changed)."""
        ...

    def close(self) -> None:
        """Let go of what it holds open (a database's connections)."""
        ...
