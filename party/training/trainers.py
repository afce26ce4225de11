"""Which trainer a party runs, by protocol and role, and what every trainer offers."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import numpy as np
from vfl.party.training.blindfl import BlindActiveTrainer, BlindPassiveTrainer
from vfl.party.training.context import RoleContext
from vfl.party.training.inputs import Inputs
from vfl.party.training.split.active import ActiveTrainer
from vfl.party.training.split.passive import PassiveTrainer
from vfl.party.training.task import Labels, Task, make_task


class Trainer(Protocol):
    """One party's training role. A job calls `setup()` (keys and layers, exchanged with
    the peers) or, to resume, `restore(state)` with a `state_dict()` from its checkpoint
    (nothing exchanged), then `run()`, and `close()` in the end. A prediction calls
    `load_model(part)`, then `score_batches` (`score` of each (tag, rows) in order, the
    outputs as they come; every party with the same batches)."""

    def setup(self) -> None: ...
    def restore(self, state: dict[str, Any]) -> None: ...
    def load_model(self, state: dict[str, Any]) -> None: ...
    def state_dict(self) -> dict[str, Any]: ...
    def run(self) -> dict: ...
    def score(self, tag: str, inputs: Inputs, rows: np.ndarray) -> np.ndarray | None: ...
    def score_batches(
        self, inputs: Inputs, batches: Sequence[tuple[str, np.ndarray]]
    ) -> Iterator[np.ndarray | None]: ...
    def close(self) -> None: ...


TRAINING_ONLY = ("opt", "updater", "history", "rows")  # what a trained model's part leaves out


def model_part(trainer: Trainer) -> dict[str, Any]:
    """What of a trainer's state a model keeps: its models, key pair and shares, not its
    optimiser, local-update cache or history (`load_model` reads it back)."""
    return {k: v for k, v in trainer.state_dict().items() if k not in TRAINING_ONLY}


def make(
    ctx: RoleContext, role: str, labels: np.ndarray | None, val_labels: np.ndarray | None
) -> Trainer:
    """Build the trainer of this party (split or blindfl; active or passive)."""
    blind = ctx.spec.protocol == "blindfl"
    if role != "active":
        return BlindPassiveTrainer(ctx) if blind else PassiveTrainer(ctx)
    if labels is None:
        raise ValueError("the active party trains with its labels")
    task = make_task(ctx.spec.model.top.task, labels[ctx.plan.train_rows])
    encoded = Labels.encoded(task, labels, val_labels)
    return (BlindActiveTrainer if blind else ActiveTrainer)(ctx, encoded, task)


def for_scoring(ctx: RoleContext, role: str, task: Task | None) -> Trainer:
    """A trainer of this party that only scores: `load_model`, then `score`."""
    blind = ctx.spec.protocol == "blindfl"
    if role != "active":
        return BlindPassiveTrainer(ctx) if blind else PassiveTrainer(ctx)
    if task is None:
        raise ValueError("the active party scores with the model's task")
    return (BlindActiveTrainer if blind else ActiveTrainer)(ctx, Labels(), task)
