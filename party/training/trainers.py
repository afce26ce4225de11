"""Which trainer a party runs, by protocol and role, and what every trainer offers."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from party.training.blindfl import BlindActiveTrainer, BlindPassiveTrainer
from party.training.context import RoleContext
from party.training.split.active import ActiveTrainer
from party.training.split.passive import PassiveTrainer
from party.training.task import make_task


class Trainer(Protocol):
    """One party's training role. A job calls `setup()` (keys and layers, exchanged with
    the peers) or, to resume, `restore(state)` with a `state_dict()` from its checkpoint
    (nothing exchanged), then `run()`, and `close()` in the end."""

    def setup(self) -> None: ...
    def restore(self, state: dict[str, Any]) -> None: ...
    def state_dict(self) -> dict[str, Any]: ...
    def run(self) -> dict: ...
    def close(self) -> None: ...


def make(
    ctx: RoleContext, role: str, labels: np.ndarray | None, val_labels: np.ndarray | None
) -> Trainer:
    """Build the trainer of this party (split or blindfl; active or passive)."""
    blind = ctx.spec.protocol == "blindfl"
    if role != "active":
        return BlindPassiveTrainer(ctx) if blind else PassiveTrainer(ctx)
    task = make_task(ctx.spec.model.top.task, labels[ctx.plan.train_rows])
    if blind:
        return BlindActiveTrainer(ctx, labels, val_labels, task)
    return ActiveTrainer(ctx, labels, val_labels, task)
