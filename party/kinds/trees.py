"""Trees: a gradient-boosted tree ensemble across parties (`model: {trees: {...}}`,
docs/protocols.md, "Gradient-boosted trees"). The roles live in `party.training.trees`;
each party's bins are its preprocessing (`party.tables.preprocess.bins`), kept with its
model part.

A round is a boosting round (the plan's rounds, one "batch" of every training row each),
so a job checkpoints after every round by default. What the model holds, for the
limits: a node is six numbers at the active party (children, owner, split id, value,
gain), a split four at a passive party; in training each party holds the histograms of
two levels of open nodes, (bins + 2) buckets of (g, h) per column. Under secureboost a
passive party's buckets are ciphertexts (a Python integer each, about the key's bytes
and 40 more), and both parties hold the round's row ciphertexts three times (made or
received, their wire form, the executor's shared copy), one a row and tree of the
round: K trees for a multiclass task of K classes, unknown before the labels load and
taken as `ASSUMED_CLASSES`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from vfl.contract.spec import JobSpec, TreesSpec
from vfl.contract.spec.data import Preprocess
from vfl.party.errors import DataError
from vfl.party.kinds.base import (
    ModelEstimate,
    ModelKind,
    ScoringRole,
    TrainingRole,
    Y,
    active_labels,
)
from vfl.party.tables.preprocess.fit import fit
from vfl.party.tables.preprocess.preprocessor import Preprocessor
from vfl.party.tables.table import RawTable
from vfl.party.training.context import RoleContext
from vfl.party.training.plan import Plan, make_plan, make_test_plan
from vfl.party.training.task import Labels, Task
from vfl.party.training.trees import ActiveTrees, PassiveTrees

NODE_BYTES = 6 * 8
HISTOGRAM_BYTES = 2 * 8  # a bucket's (g, h)
MAX_OPEN = 4096  # open nodes a level holds at most, whatever the depth (rows run out)
CIPHERTEXT_OVERHEAD = 40  # bytes of a Python integer besides its digits
ROW_COPIES = 3  # a round's row ciphertexts: made or received, wire form, shared copy
ASSUMED_CLASSES = 8  # a multiclass task's trees a round, for the estimate


def _trees(spec: JobSpec) -> TreesSpec:
    if spec.model.trees is None:
        raise ValueError(f"job '{spec.job}' trains no trees")
    return spec.model.trees


class Trees(ModelKind):
    name = "trees"

    def keyed(self, spec: JobSpec) -> bool:
        return spec.protocol == "secureboost"  # the active party's keys, at KEYING

    def check_rows(
        self, spec: JobSpec, raw: RawTable, mode: Preprocess | None, party_id: str
    ) -> None:
        if raw.sparse is not None:
            message = (
                f"party '{party_id}': dataset '{raw.name}' is a LIBSVM table; tree models "
                "take CSV or Parquet tables for now"
            )
            raise DataError(message, public=message)

    def trainer(self, ctx: RoleContext, role: str, labels: Y, val_labels: Y) -> TrainingRole:
        if role != "active":
            return PassiveTrees(ctx)
        encoded, task = active_labels(ctx, labels, val_labels)
        return ActiveTrees(ctx, encoded, task)

    def scorer(self, ctx: RoleContext, role: str, task: Task | None) -> ScoringRole:
        if role != "active":
            return PassiveTrees(ctx)
        if task is None:
            raise ValueError("the active party scores with the model's task")
        return ActiveTrees(ctx, Labels(), task)

    def model_part(self, trainer: TrainingRole) -> dict[str, Any]:
        """The active party's trees, own splits and importance; a passive party's splits
        and importance (`model_part` of each role)."""
        if not isinstance(trainer, ActiveTrees | PassiveTrees):
            raise TypeError(f"not a tree role: {type(trainer).__name__}")
        return trainer.model_part()

    def key_fingerprint(self, trainer: TrainingRole) -> str:
        return ""

    def estimate(
        self, spec: JobSpec, party_id: str, columns: int, training: bool, rows: int | None = None
    ) -> ModelEstimate:
        trees = _trees(spec)
        parameters = self._nodes(spec, party_id)
        if not training:
            return ModelEstimate(0, 0)
        classes = ASSUMED_CLASSES if trees.task == "multiclass" else 1
        open_nodes = min(2 ** (trees.depth - 1) * classes, MAX_OPEN)
        bucket = HISTOGRAM_BYTES
        passive = spec.party(party_id).role == "passive"
        held = parameters * NODE_BYTES
        if spec.protocol == "secureboost":
            width = spec.crypto.key_bits // 8
            held += ROW_COPIES * (rows or 0) * classes * width
            if passive:
                bucket = width + CIPHERTEXT_OVERHEAD
        histograms = 3 * open_nodes * columns * (trees.bins + 2) * bucket
        return ModelEstimate(parameters, held + histograms)

    def parameters(
        self, spec: JobSpec, party_id: str, width: int, cardinalities: Sequence[int]
    ) -> int:
        return self._nodes(spec, party_id)

    def parameter_bytes(self, spec: JobSpec) -> int:
        return NODE_BYTES

    @staticmethod
    def _nodes(spec: JobSpec, party_id: str) -> int:
        """Nodes (active) or splits (passive) the model holds at most (a multiclass
        model's per class)."""
        trees = _trees(spec)
        active = spec.party(party_id).role == "active"
        per_tree = 2 ** (trees.depth + 1) - 1 if active else 2**trees.depth - 1
        return trees.count * per_tree

    def preprocessing(
        self, spec: JobSpec, raw: RawTable, rows: np.ndarray, mode: Preprocess
    ) -> Preprocessor:
        """Bins, fitted on the party's training rows (`party.tables.preprocess.bins`)."""
        return fit(raw, rows, mode, bins=_trees(spec).bins)

    def plan(self, spec: JobSpec, rows: int, test_rows: int | None) -> Plan:
        """One round per boosting round (`trees.count`), each over every training row; a
        validation after each round (early stopping needs every one)."""
        t, v, count = spec.train, spec.validation, _trees(spec).count
        one_batch, every = max(rows, 1), v.every or 1
        if test_rows is None:
            return make_plan(rows, v.fraction, one_batch, count, t.seed, every, spec.protocol)
        return make_test_plan(rows, test_rows, one_batch, count, t.seed, every, spec.protocol)


def importance_by_name(part: dict[str, Any]) -> dict[str, Any]:
    """A tree model part's importance with the party's own columns named (its bins'
    columns, then its categorical ones): {column: {gain, splits}}, and at the active
    party each passive party's totals under `parties`."""
    pre = Preprocessor.model_validate_json(part["preprocess"])
    names = [*pre.feature_names, *(c.name for c in pre.embedded)]
    importance = part.get("importance") or {}
    own = importance.get("own", importance)
    named = {
        name: {"gain": float(g), "splits": int(n)}
        for name, g, n in zip(names, own.get("gain", []), own.get("splits", []), strict=False)
    }
    if "parties" in importance:
        return {"columns": named, "parties": dict(importance["parties"])}
    return {"columns": named}
