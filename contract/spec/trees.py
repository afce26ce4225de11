"""The model section of a gradient-boosted tree ensemble: `model: {trees: {...}}`
(`TreesSpec`). Every field has a default; bounds live on the fields, so `vfl spec schema`
and the errors (each naming its field) both come from here. The algorithm is XGBoost's
(second-order gain with `l2` and `min_child_weight`, trees grown level by level to
`depth`) over each party's own quantile bins (docs/protocols.md, "Gradient-boosted
trees")."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field
from vfl.contract.spec.fields import NUMBER, FieldProblem, SpecModel

Task = Literal["binary", "multiclass", "regression"]

MAX_DEPTH = 12  # 4,095 split nodes a tree; deeper trees overfit tabular data anyway
MAX_BINS = 255  # a party's bin codes (0: an empty cell) fit one byte


class TreesSpec(SpecModel):
    """A gradient-boosted tree ensemble: each round adds one tree (one per class for a
    multiclass task) fitted to the gradients of the loss; every party bins its own
    columns on its own training rows, and only the active party holds the trees'
    structure and leaf values."""

    task: Task = "binary"
    count: int = Field(
        100,
        ge=1,
        le=10_000,
        strict=True,
        description="boosting rounds: trees, or trees per class for a multiclass task",
    )
    depth: int = Field(
        5, ge=1, le=MAX_DEPTH, strict=True, description="levels of splits per tree (1: stumps)"
    )
    bins: int = Field(
        32,
        ge=2,
        le=MAX_BINS,
        strict=True,
        description="quantile bins per numeric column; a categorical column keeps its "
        "bins - 1 most frequent words seen twice or more, and every other word shares one "
        "bin; an empty cell is a bin of its own besides these",
    )
    learning_rate: Annotated[float, Field(gt=0, le=1, strict=True), NUMBER] = Field(
        0.1, description="shrinkage of every leaf value, in (0, 1]"
    )
    l2: Annotated[float, Field(ge=0, le=1e6, strict=True), NUMBER] = Field(
        1.0, description="L2 regularisation of leaf values (XGBoost's lambda)"
    )
    min_child_weight: Annotated[float, Field(ge=0, le=1e6, strict=True), NUMBER] = Field(
        1.0, description="the least sum of hessians in a child of a split"
    )
    subsample: Annotated[float, Field(gt=0, le=1, strict=True), NUMBER] = Field(
        1.0, description="fraction of the training rows each round's trees are grown on"
    )
    active_trees: int = Field(
        0,
        ge=0,
        le=10_000,
        strict=True,
        description="the first this many rounds' trees grown on the active party's columns "
        "alone: the passive parties receive nothing of them, neither (g, h) nor row "
        "partitions (SecureBoost's reduced-leakage mode); 0: off",
    )
    active_levels: int = Field(
        0,
        ge=0,
        le=MAX_DEPTH,
        strict=True,
        description="the first this many levels of every tree split on the active party's "
        "columns alone: the passive parties offer no candidates there (they still receive "
        "those levels' row partitions, to sum the nodes below); 0: off",
    )
    early_stopping: int | None = Field(
        None,
        ge=1,
        strict=True,
        description="stop after this many rounds without a lower validation loss, keeping "
        "the rounds up to the best; null: train every round",
    )


def check_sections(defence: bool, local_updates: str, scheme: str) -> None:
    """What a tree model takes of the job spec's other sections: no `defence` (a split
    network's), no local updates (`local_updates.mode`), no lattice scheme (secureboost's
    is Okamoto-Uchiyama, sized by `crypto.key_bits`)."""
    if scheme != "paillier":
        raise FieldProblem(
            "crypto.scheme",
            f"is {scheme}, a scheme of blindfl networks; secureboost encrypts with "
            "Okamoto-Uchiyama keys of crypto.key_bits (leave crypto.scheme out)",
        )
    if defence:
        raise FieldProblem("defence", "is for network models (model.source, model.top)")
    if local_updates != "none":
        raise FieldProblem(
            "local_updates", "are for network models; trees take local_updates: {mode: none}"
        )
