"""One party's part of a stored model, loaded to score rows (batch or online).

`LoadedModel.open` reads the part from the party's model store; `inputs` checks a table
against the model's manifest (column names, order, kinds, categorical codes) before any
computation; `scorer` builds the party's trainer in scoring mode on a job's channel.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
from vfl.contract.spec import JobSpec
from vfl.party.data import Table, load_table, with_columns
from vfl.party.errors import DataError, ModelError, UnknownModel
from vfl.party.job import Dataset
from vfl.party.state import StateDir
from vfl.party.state.models import Manifest, ModelStore
from vfl.party.training import trainers
from vfl.party.training.context import Reporter, RoleContext
from vfl.party.training.models import Inputs
from vfl.party.training.plan import Plan
from vfl.secure.channel import Channel
from vfl.secure.executor import BlockExecutor


@dataclass(frozen=True)
class LoadedModel:
    """A party's manifest and part of one model, and the training spec it came from."""

    manifest: Manifest
    part: dict[str, Any]
    spec: JobSpec

    @classmethod
    def open(cls, state: StateDir | None, model_id: str, party_id: str) -> LoadedModel:
        """Raises:
        UnknownModel: the party keeps no models, or holds no part of `model_id`.
        ModelError: its part is unusable (corrupt, another party's)."""
        if state is None:
            raise UnknownModel(
                f"party '{party_id}' keeps no state directory, so it holds no models; "
                "restart its daemon with --state-dir and train the model again"
            )
        manifest, part = ModelStore(state).load(model_id, party_id)
        return cls(manifest, part, JobSpec.from_json(manifest.spec_json))

    @property
    def model_id(self) -> str:
        return self.manifest.model_id

    def inputs(self, table: Table, dataset: str) -> Inputs:
        """The model's inputs from `table`, checked against the manifest.

        Raises:
            ModelError: the columns differ from the model's (names, order, kinds), or a
                categorical code was never trained (the public form names no column).
        """
        m, party = self.manifest, self.manifest.party_id
        where = f"party '{party}': dataset '{dataset}' does not fit model {m.model_id}"
        try:  # LIBSVM rows: by column index (unseen columns dropped, missing ones zero)
            features = with_columns(table, m.dense_columns, where).features
        except DataError as exc:
            raise ModelError(str(exc), public=exc.public) from None
        cats = m.categorical_columns
        have = 0 if table.categorical is None else table.categorical.shape[1]
        if have != len(cats):
            raise ModelError(
                f"{where}: it has {have} categorical column(s), the model "
                f"{len(cats)} ({_short(tuple(c.name for c in cats))}); set the dataset's "
                "'categorical' columns as in training",
                public=f"{where}: it has {have} categorical column(s), the model {len(cats)}",
            )
        for j, col in enumerate(cats):
            codes = table.categorical[:, j] if table.categorical is not None else None
            if codes is not None and codes.size and int(codes.max()) >= col.cardinality:
                row = int(np.argmax(codes >= col.cardinality))
                raise ModelError(
                    f"{where}: categorical column '{col.name}' has code {int(codes[row])} "
                    f"(id {table.ids[row]}), but the model was trained on codes "
                    f"0..{col.cardinality - 1} and has no unknown bucket; map unseen values "
                    "to a trained code",
                    public=f"{where}: a categorical column holds a code the model was not "
                    "trained on (it has no unknown bucket)",
                )
        return Inputs(features, table.categorical, tuple(c.cardinality for c in cats))

    def read(self, dataset: Dataset) -> tuple[Table, Inputs]:
        """Load `dataset` (a dataset of this party's config) and its inputs to the model.

        Raises:
            DataError: it does not load. ModelError: it does not fit the model.
        """
        table = load_table(dataset.source, dataset.name)
        return table, self.inputs(table, dataset.name)

    def scorer(
        self,
        channel: Channel,
        inputs: Inputs,
        reporter: Reporter,
        batch_size: int,
        timeout_s: float | None = None,
        executor: BlockExecutor | None = None,
    ) -> trainers.Trainer:
        """This party's trainer in scoring mode, loaded with the model: call its
        `score(tag, inputs, rows)` in the same order as every other party. Its receives
        wait up to `timeout_s` (default: the training spec's `train.timeout_s`); its
        Paillier work runs on `executor` (None: its own local pool)."""
        rows = np.arange(inputs.rows)
        spec = self.spec
        if timeout_s is not None:
            spec = spec.model_copy(
                update={"train": spec.train.model_copy(update={"timeout_s": float(timeout_s)})}
            )
        plan = Plan(len(rows), rows, rows, batch_size, 1, spec.train.seed, 1)
        ctx = RoleContext(
            spec,
            self.manifest.party_id,
            channel,
            inputs,
            plan,
            reporter,
            inputs,
            lock=threading.RLock(),
            executor=executor,
        )
        trainer = trainers.for_scoring(ctx, self.manifest.role, self.manifest.task)
        trainer.load_model(self.part)
        return trainer


def _short(names: tuple[str, ...]) -> str:
    shown = ", ".join(names[:8])
    return f"[{shown}{', ...' if len(names) > 8 else ''}] ({len(names)})"
