"""Which trainer a party runs, by protocol and role."""

from __future__ import annotations

import numpy as np

from party.training.blindfl import BlindActiveTrainer, BlindPassiveTrainer
from party.training.context import RoleContext
from party.training.split.active import ActiveTrainer
from party.training.split.passive import PassiveTrainer
from party.training.task import make_task


def make(ctx: RoleContext, role: str, labels: np.ndarray | None, val_labels: np.ndarray | None):
    """Build the trainer of this party (split or blindfl; active or passive)."""
    blind = ctx.spec.protocol == "blindfl"
    if role != "active":
        return BlindPassiveTrainer(ctx) if blind else PassiveTrainer(ctx)
    task = make_task(ctx.spec.model.top.task, labels[ctx.plan.train_rows])
    if blind:
        return BlindActiveTrainer(ctx, labels, val_labels, task)
    return ActiveTrainer(ctx, labels, val_labels, task)
