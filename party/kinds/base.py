"""The model-kind seam: what a party asks of the family of model a job trains.

A job's spec names its kind by its model section (`JobSpec.model.kind`: `network` today).
The daemon, the job, the model store, batch and online scoring and the limits never ask
which kind or protocol they run (`if protocol == ...`); they ask the job's `ModelKind`
(`party.kinds.kind_of`), which answers the same few questions for every family:

- what a party trains: `trainer` builds its `TrainingRole` (active or passive), and
  `keyed` says whether the job has a KEYING stage (keys exchanged before training);
- what its model part holds: `model_part` of a trained role, `key_fingerprint`;
- how it scores rows: `scorer` builds its `ScoringRole` from a stored part;
- what it will hold in memory: `estimate` before the data loads (`party.limits`), and
  `parameters` once the inputs are known;
- which rows it can take at all: `check_rows` (e.g. the secure layers' fixed-point range);
- how a party prepares its rows and schedules its rounds: `preprocessing` (fitted on its
  training rows) and `plan` (a network's batches, a tree ensemble's boosting rounds).

What `vfl attack` runs on a kind's recorded views is the attack package's own table
(`attack.kinds`), as the attacks are the analyst's code, not the party's.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from vfl.contract.spec import JobSpec
from vfl.contract.spec.data import Preprocess
from vfl.party.tables.preprocess.fit import fit
from vfl.party.tables.preprocess.preprocessor import Preprocessor
from vfl.party.tables.table import RawTable
from vfl.party.training.context import RoleContext
from vfl.party.training.inputs import Inputs
from vfl.party.training.plan import Plan, make_plan, make_test_plan
from vfl.party.training.task import Labels, Task, make_task

Y = np.ndarray | None  # the active party's labels (training, validation); None elsewhere


class TrainingRole(Protocol):
    """One party's training role. A job calls `setup()` (keys and layers, exchanged with
    the peers) or, to resume, `restore(state)` with a `state_dict()` from its checkpoint
    (nothing exchanged), then `run()`, and `close()` in the end."""

    def setup(self) -> None: ...
    def restore(self, state: dict[str, Any]) -> None: ...
    def state_dict(self) -> dict[str, Any]: ...
    def run(self) -> dict: ...
    def close(self) -> None: ...


class ScoringRole(Protocol):
    """One party's part of a stored model, scoring: `load_model(part)`, then `score` of
    each (tag, rows) in the same order as every other party (`score_batches`: of many,
    the outputs as they come); only the active party's outputs are scores."""

    def load_model(self, state: dict[str, Any]) -> None: ...
    def score(self, tag: str, inputs: Inputs, rows: np.ndarray) -> np.ndarray | None: ...
    def score_batches(
        self, inputs: Inputs, batches: Sequence[tuple[str, np.ndarray]]
    ) -> Iterator[np.ndarray | None]: ...
    def close(self) -> None: ...


@dataclass(frozen=True)
class ModelEstimate:
    """What a job's model will hold at one party, before its data loads: parameters, and
    the bytes of everything the model side holds in training (parameters, their gradients
    and optimiser state, activations, ciphertexts, key tables)."""

    parameters: int
    bytes: int


class ModelKind(ABC):
    """One family of models (networks; gradient-boosted trees to come), as a party runs
    it. One instance per kind, without state: every method gets what it needs."""

    name: str  # as `JobSpec.model.kind` names it

    @abstractmethod
    def keyed(self, spec: JobSpec) -> bool:
        """Whether a job of `spec` exchanges keys (a KEYING stage) before it trains."""

    @abstractmethod
    def check_rows(
        self, spec: JobSpec, raw: RawTable, mode: Preprocess | None, party_id: str
    ) -> None:
        """Refuse rows this kind cannot take under `spec`, before any key is made.

        Raises:
            DataError: names the party, the column and the fix.
        """

    @abstractmethod
    def trainer(self, ctx: RoleContext, role: str, labels: Y, val_labels: Y) -> TrainingRole:
        """The training role of this party (`role`: active, with its labels, or passive)."""

    @abstractmethod
    def scorer(self, ctx: RoleContext, role: str, task: Task | None) -> ScoringRole:
        """The scoring role of this party, before `load_model` (the active party's needs
        the model's `task`)."""

    @abstractmethod
    def model_part(self, trainer: TrainingRole) -> dict[str, Any]:
        """What of a trained role's state its model part keeps (what `load_model` reads)."""

    @abstractmethod
    def key_fingerprint(self, trainer: TrainingRole) -> str:
        """The SHA-256 of the key the part holds ("" for none), named in its manifest."""

    @abstractmethod
    def estimate(
        self, spec: JobSpec, party_id: str, columns: int, training: bool, rows: int | None = None
    ) -> ModelEstimate:
        """What the model side of a job holds at `party_id`, over `columns` feature
        columns (embeddings, whose vocabularies are unknown before the data loads,
        aside) and `rows` rows (None: unknown); a prediction (`training=False`) builds no
        new model."""

    @abstractmethod
    def parameters(
        self, spec: JobSpec, party_id: str, width: int, cardinalities: Sequence[int]
    ) -> int:
        """The parameters this party's model holds over loaded inputs of `width` numeric
        columns and categorical columns of `cardinalities`."""

    @abstractmethod
    def parameter_bytes(self, spec: JobSpec) -> int:
        """Bytes a parameter holds in training (with its gradient and optimiser slots)."""

    def preprocessing(
        self, spec: JobSpec, raw: RawTable, rows: np.ndarray, mode: Preprocess
    ) -> Preprocessor:
        """This party's preprocessing of `raw`, fitted on its training `rows` (the
        dataset's `preprocess:` mode)."""
        return fit(raw, rows, mode)

    def plan(self, spec: JobSpec, rows: int, test_rows: int | None) -> Plan:
        """The rounds of a job over `rows` aligned rows (and `test_rows` aligned test
        rows, if the parties name test datasets): the same at every party.

        Raises:
            JobError: too few rows to split off validation rows, or no test rows.
        """
        t, v = spec.train, spec.validation
        if test_rows is None:
            return make_plan(
                rows, v.fraction, t.batch_size, t.epochs, t.seed, v.every, spec.protocol
            )
        return make_test_plan(
            rows, test_rows, t.batch_size, t.epochs, t.seed, v.every, spec.protocol
        )


def active_labels(
    ctx: RoleContext, labels: np.ndarray | None, val_labels: np.ndarray | None
) -> tuple[Labels, Task]:
    """The active party's encoded labels and the task they make (read from the training
    rows' labels).

    Raises:
        ValueError: no labels (only the active party trains with them).
        DataError: the labels do not fit the spec's task.
    """
    if labels is None:
        raise ValueError("the active party trains with its labels")
    task = make_task(ctx.spec.model.task, labels[ctx.plan.train_rows])
    return Labels.encoded(task, labels, val_labels), task
