"""Split learning (DESIGN.md §4 `split`), vanilla: one communication round per batch.

Passive party: bottom model over its features; sends activations, receives derivatives.
Active party: its own bottom model, the top model, the loss, derivatives and metrics.
Both are written against `Channel` only; tags are `train/r{round}/act|grad` and
`val/r{round}/act`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import torch

from coordinator.spec import JobSpec
from party.training.models import make_optimizer, seeded_mlp
from party.training.plan import Plan
from party.training.task import Task
from secure.channel import Channel
from secure.payload import tensor_from_payload, tensor_to_payload


class Reporter(Protocol):
    def round(self, rnd: int, total: int, loss: float | None) -> None: ...
    def validation(self, rnd: int, metrics: dict[str, float]) -> None: ...


@dataclass
class RoleContext:
    spec: JobSpec
    party_id: str
    channel: Channel
    features: np.ndarray  # aligned order
    plan: Plan
    reporter: Reporter
    history: list[dict] = field(default_factory=list)

    @property
    def timeout(self) -> float:
        return self.spec.train.timeout_s


class PassiveTrainer:
    """A passive party's bottom model."""

    def __init__(self, ctx: RoleContext) -> None:
        s = ctx.spec
        self.ctx = ctx
        self.active = s.active.id
        self.x = torch.as_tensor(ctx.features, dtype=torch.float32)
        self.bottom = seeded_mlp(
            s.train.seed,
            ctx.party_id,
            self.x.shape[1],
            s.model.source.hidden,
            s.model.source.out_dim,
        )
        self.opt = make_optimizer(s.train.optimizer, self.bottom.parameters(), s.train.lr)

    def run(self) -> dict:
        for rnd, _, rows in self.ctx.plan.batches():
            self.step(rnd, rows)
            if self.ctx.plan.validates_at(rnd):
                self.validate(rnd)
        return {"rounds": self.ctx.plan.total_rounds}

    def step(self, rnd: int, rows: np.ndarray) -> None:
        act = self.bottom(self.x[rows])
        ch = self.ctx.channel
        ch.send(self.active, f"train/r{rnd}/act", tensor_to_payload(act.detach().numpy()))
        grad = tensor_from_payload(
            ch.recv(self.active, f"train/r{rnd}/grad", self.ctx.timeout),
            shape=tuple(act.shape),
            dtype="float32",
        )
        self.opt.zero_grad()
        act.backward(torch.from_numpy(grad))
        self.opt.step()

    def validate(self, rnd: int) -> None:
        with torch.no_grad():
            act = self.bottom(self.x[self.ctx.plan.val_rows])
        self.ctx.channel.send(self.active, f"val/r{rnd}/act", tensor_to_payload(act.numpy()))


class ActiveTrainer:
    """The active party: own bottom model, top model, loss and metrics."""

    def __init__(self, ctx: RoleContext, labels: np.ndarray, task: Task) -> None:
        s = ctx.spec
        self.ctx, self.task = ctx, task
        self.passives = [p.id for p in s.passives]
        self.width = s.model.source.out_dim
        self.x = torch.as_tensor(ctx.features, dtype=torch.float32)
        self.y = task.encode(labels)
        own = self.x.shape[1] > 0
        self.bottom = (
            seeded_mlp(
                s.train.seed, ctx.party_id, self.x.shape[1], s.model.source.hidden, self.width
            )
            if own
            else None
        )
        top_in = self.width * (len(self.passives) + int(own))
        self.top = seeded_mlp(s.train.seed, "top", top_in, s.model.top.hidden, task.out_dim)
        params = list(self.top.parameters())
        if self.bottom is not None:
            params += list(self.bottom.parameters())
        self.opt = make_optimizer(s.train.optimizer, params, s.train.lr)
        self.started = time.monotonic()
        self.metrics: dict[str, float] = {}

    def run(self) -> dict:
        plan = self.ctx.plan
        for rnd, _, rows in plan.batches():
            loss = self.step(rnd, rows)
            self.ctx.reporter.round(rnd, plan.total_rounds, loss)
            if plan.validates_at(rnd):
                self.validate(rnd)
        return {"rounds": plan.total_rounds, "metrics": self.metrics, "history": self.ctx.history}

    def _recv_acts(self, tag: str, n: int) -> list[torch.Tensor]:
        return [
            torch.from_numpy(
                tensor_from_payload(
                    self.ctx.channel.recv(p, tag, self.ctx.timeout),
                    shape=(n, self.width),
                    dtype="float32",
                )
            )
            for p in self.passives
        ]

    def _forward(self, rows: np.ndarray, acts: list[torch.Tensor]) -> torch.Tensor:
        parts = list(acts)
        if self.bottom is not None:
            parts.insert(0, self.bottom(self.x[rows]))
        return self.top(torch.cat(parts, dim=1))

    def step(self, rnd: int, rows: np.ndarray) -> float:
        acts = [a.requires_grad_(True) for a in self._recv_acts(f"train/r{rnd}/act", len(rows))]
        loss = self.task.losses(self._forward(rows, acts), self.y[rows]).mean()
        self.opt.zero_grad()
        loss.backward()
        for p, a in zip(self.passives, acts, strict=True):
            self.ctx.channel.send(p, f"train/r{rnd}/grad", tensor_to_payload(a.grad.numpy()))
        self.opt.step()
        return float(loss.detach())

    def validate(self, rnd: int) -> None:
        rows = self.ctx.plan.val_rows
        acts = self._recv_acts(f"val/r{rnd}/act", len(rows))
        with torch.no_grad():
            out = self._forward(rows, acts).numpy()
        self.metrics = self.task.evaluate(out, self.y[rows])
        entry = {"round": rnd, "seconds": round(time.monotonic() - self.started, 3), **self.metrics}
        self.ctx.history.append(entry)
        self.ctx.reporter.validation(rnd, self.metrics)
