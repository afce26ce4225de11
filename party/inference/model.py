"""One party's part of a stored model, loaded to score rows (batch or online).

`LoadedModel.open` reads the part from the party's model store; `read` loads a dataset,
checks its columns against those the model was trained on (before any computation) and
preprocesses it as in training (`prepare`: the same for rows already read raw; `no_rows`:
for none, the model's width);
`scorer` builds the party's scoring role (its model kind's) on a job's channel.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from vfl.contract.spec import JobSpec
from vfl.party.datasets import Dataset
from vfl.party.errors import DataError, ModelError, UnknownModel
from vfl.party.kinds import ScoringRole, kind_named
from vfl.party.state import StateDir
from vfl.party.state.model_store import Manifest, ModelStore
from vfl.party.tables.load import read_raw
from vfl.party.tables.preprocess.drift import Drift
from vfl.party.tables.preprocess.fitted import Categorical, Numeric, SparseScales
from vfl.party.tables.preprocess.preprocessor import Preprocessor
from vfl.party.tables.reader.buffers import IDS
from vfl.party.tables.stability import StabilityReference
from vfl.party.tables.table import RawColumn, RawTable, Table
from vfl.party.training.context import Reporter, RoleContext
from vfl.party.training.inputs import Inputs
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

    @property
    def preprocessor(self) -> Preprocessor:
        """The party's preprocessing fitted in training (a part kept before preprocessing
        existed: its columns as they were, mode none)."""
        saved = self.part.get("preprocess")
        if saved is not None:
            return Preprocessor.model_validate_json(saved)
        columns = tuple(
            Numeric(name=c.name, limit=None)
            if c.kind == "dense"
            else Categorical(name=c.name, cardinality=c.cardinality)
            for c in self.manifest.columns
        )
        return Preprocessor(mode="none", columns=columns)

    def read(
        self, dataset: Dataset, check: Callable[[int, int], None] | None = None
    ) -> tuple[Table, Inputs, Drift]:
        """Load `dataset` (a dataset of this party's config), preprocess it as in training
        and give its inputs to the model, and what drifted from the training rows.
        `check`: the table reader's, between blocks (`read_raw`).

        Raises:
            DataError: it does not load. ModelError: its columns do not fit the model.
            Exception: what `check` raises (a job the party's limits guard failed).
        """
        return self.prepare(self.read_raw(dataset, check))

    def read_raw(
        self, dataset: Dataset, check: Callable[[int, int], None] | None = None
    ) -> RawTable:
        """`dataset` read raw as the model reads it (its mode and column kinds).

        Raises:
            DataError: it does not load. Exception: what `check` raises.
        """
        pre = self.preprocessor
        schema = pre.kinds() if pre.sparse is None else None
        return read_raw(dataset.source, dataset.name, pre.mode, schema, check=check)

    @property
    def stability(self) -> StabilityReference | None:
        """The training rows' bins of population stability (None: a part kept before
        they were)."""
        saved = self.part.get("stability")
        return None if saved is None else StabilityReference.model_validate_json(saved)

    def prepare(self, raw: RawTable) -> tuple[Table, Inputs, Drift]:
        """Rows read raw (`read_raw` with this model's mode and column kinds: a dataset of
        this party's, or the rows a source fetched by id) preprocessed as in training, their
        inputs to the model, and what drifted from the training rows.

        Raises:
            ModelError: their columns do not fit the model.
        """
        m, pre = self.manifest, self.preprocessor
        if raw.sparse is not None and pre.sparse is None:  # a LIBSVM part kept before
            names = m.dense_columns
            pre = Preprocessor(
                mode="none", sparse=SparseScales(names=names, scales=(1.0,) * len(names))
            )
        where = f"party '{m.party_id}': dataset '{raw.name}' does not fit model {m.model_id}"
        try:
            table, drift = pre.apply(raw, where)
        except DataError as exc:
            raise ModelError(str(exc), public=exc.public) from None
        inputs = Inputs(table.features, table.categorical, table.cardinalities)
        return table, inputs, drift

    def no_rows(
        self, name: str, columns: Sequence[str] | None = None
    ) -> tuple[Table, Inputs, Drift]:
        """`prepare` of no rows of dataset `name` with `columns` (None: the model's own):
        inputs of the model's width (what a table queried by id holds in memory), or the
        error that rows with these columns would get.

        Raises:
            ModelError: `columns` do not fit the model; the model was trained on LIBSVM
                columns (a table of named columns never fits it).
        """
        pre = self.preprocessor
        if pre.sparse is not None:
            raise ModelError(
                f"party '{self.manifest.party_id}': model {self.model_id} was trained on "
                f"LIBSVM columns; dataset '{name}' has named columns, which cannot fit it",
                public=f"dataset '{name}' has named columns and the model LIBSVM ones",
            )
        kinds = pre.kinds()
        given = tuple(kinds) if columns is None else columns
        empty = tuple(_no_cells(c, kinds.get(c, "numeric"), name) for c in given)
        return self.prepare(RawTable(name, np.empty(0, dtype=IDS), None, empty))

    def scorer(
        self,
        channel: Channel,
        inputs: Inputs,
        reporter: Reporter,
        batch_size: int,
        timeout_s: float | None = None,
        executor: BlockExecutor | None = None,
    ) -> ScoringRole:
        """This party's scoring role of the model's kind, loaded with the model: call its
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
        scorer = kind_named(self.manifest.kind).scorer(ctx, self.manifest.role, self.manifest.task)
        scorer.load_model(self.part)
        return scorer


def _no_cells(column: str, kind: str, dataset: str) -> RawColumn:
    """Column `column` of no rows, read as `kind` (numeric, categorical or ignore)."""
    if kind == "ignore":
        return RawColumn(column, ignored=True, lines=False, dataset=dataset)
    if kind == "categorical":
        codes = np.empty(0, dtype=np.int32)
        return RawColumn(column, codes=codes, words=(), lines=False, dataset=dataset)
    return RawColumn(column, values=np.empty(0, dtype=np.float32), lines=False, dataset=dataset)
