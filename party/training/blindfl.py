"""`protocol: blindfl` (DESIGN.md §5): a federated MatMul source layer, then B's top model.

No party holds a plaintext model over another's features: the source layer's weights are
secret-shared and the cross terms are computed under Paillier encryption
(`secure.source_layer`). B learns Z = X_A W_A + X_B W_B + b and runs the top model in
plaintext; passive parties only ever see ciphertexts.

Local updates (DESIGN.md §6, last bullet): B runs CELU in full on cached (Z, G): the top
model and its own share; a passive party re-applies cached encrypted steps [[lr G]]
homomorphically, with uniform sampling and weight 1.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn

from celu.weighting import active_local_loss
from celu.workset import CachedBatch
from party.training.active import history_entry
from party.training.context import RoleContext
from party.training.models import Inputs, make_optimizer, seeded_mlp
from party.training.task import Task
from secure.config import SecureConfig
from secure.source_layer import ActiveSourceLayer, PassiveSourceLayer

SPARSE_DENSITY = 0.3


def secure_config(ctx: RoleContext, inputs: Inputs) -> SecureConfig:
    dense = inputs.dense.numpy()
    integral = (
        bool(np.all(dense == np.round(dense))) and float(np.abs(dense).max(initial=0.0)) < 2**20
    )
    crypto = ctx.spec.crypto
    return SecureConfig(
        key_bits=crypto.key_bits,
        allow_insecure_test_keys=crypto.allow_insecure_test_keys,
        feature_bits=0 if integral else 16,
        timeout_s=ctx.timeout,
    )


def features(inputs: Inputs, rows: np.ndarray):
    """The rows as float64, CSR when sparse (the secure product then costs O(nnz))."""
    dense, cat = inputs.take(rows)
    if cat is not None:
        raise ValueError(
            "categorical fields under protocol: blindfl need the Embed-MatMul "
            "layer, which this build does not include; use protocol: split"
        )
    x = dense.numpy().astype(np.float64)
    if x.size and np.count_nonzero(x) / x.size < SPARSE_DENSITY:
        return sp.csr_matrix(x)
    return x


class BlindActiveTrainer:
    def __init__(
        self, ctx: RoleContext, labels: np.ndarray, val_labels: np.ndarray, task: Task
    ) -> None:
        s = ctx.spec
        self.ctx, self.task = ctx, task
        self.y, self.val_y = task.encode(labels), task.encode(val_labels)
        h = s.model.source.out_dim
        self.src = ActiveSourceLayer(
            ctx.channel,
            [p.id for p in s.passives],
            ctx.inputs.dense.shape[1],
            h,
            secure_config(ctx, ctx.inputs),
            s.train.seed,
        )
        identity = not s.model.top.hidden and h == task.out_dim
        self.top: nn.Module = (
            nn.Identity()
            if identity
            else seeded_mlp(s.train.seed, "top", h, s.model.top.hidden, task.out_dim)
        )
        params = list(self.top.parameters())
        self.opt = make_optimizer(s.train.optimizer, params, s.train.lr) if params else None
        self.src_lr = s.model.source.lr or s.train.lr
        self.updater = ctx.local_updater(self.local_update)
        self.xi = self.updater.config.effective_xi
        self.metrics: dict[str, float] = {}
        self.history: list[dict] = []

    def run(self) -> dict:
        plan = self.ctx.plan
        try:
            self.src.setup("src")
            self.started = time.monotonic()
            self.val_seconds = 0.0
            with self.updater:
                for rnd, _, rows in plan.batches():
                    loss = self.step(rnd, rows)
                    self.ctx.reporter.round(rnd, plan.total_rounds, loss)
                    if plan.validates_at(rnd):
                        self.validate(rnd)
        finally:
            self.src.close()
        return {
            "rounds": plan.total_rounds,
            "local_updates": self.updater.num_local_updates,
            "metrics": self.metrics,
            "history": self.history,
        }

    def _top_step(self, z: torch.Tensor, rows: np.ndarray, cached_g=None):
        """One top-model update on Z; returns (loss, dL/dZ)."""
        leaf = z.clone().requires_grad_(True)
        losses = self.task.losses(self.top(leaf), self.y[rows])
        if cached_g is None:
            loss = losses.mean()
        else:
            loss, _ = active_local_loss(losses, leaf, cached_g, self.xi)
        if self.opt is not None:
            self.opt.zero_grad()
        loss.backward()
        if self.opt is not None:
            self.opt.step()
        return float(loss.detach()), leaf.grad.detach().clone()

    def step(self, rnd: int, rows: np.ndarray) -> float:
        tag = f"train/r{rnd}"
        z = torch.from_numpy(self.src.forward(tag, features(self.ctx.inputs, rows))).float()
        with self.ctx.lock:
            loss, grad = self._top_step(z, rows)
        self.src.backward(tag, grad.double().numpy(), self.src_lr)
        self.updater.record_round(rnd, (rows, z), grad)
        return loss

    def local_update(self, batch_id: int, entry: CachedBatch, t: int) -> None:
        rows, z = entry.activation
        _, grad = self._top_step(z, rows, entry.derivative)
        self.src.local_step(features(self.ctx.inputs, rows), grad.double().numpy(), self.src_lr)

    def validate(self, rnd: int) -> None:
        begun = time.monotonic()
        rows = self.ctx.plan.val_rows
        with self.ctx.lock:
            z = self.src.forward(f"val/r{rnd}", features(self.ctx.val_inputs, rows))
            with torch.no_grad():
                out = self.top(torch.from_numpy(z).float()).numpy()
        self.metrics = self.task.evaluate(out, self.val_y[rows])
        self.history.append(history_entry(self, rnd, begun))
        self.ctx.reporter.validation(rnd, self.metrics)


class BlindPassiveTrainer:
    def __init__(self, ctx: RoleContext) -> None:
        s = ctx.spec
        self.ctx = ctx
        self.src = PassiveSourceLayer(
            ctx.channel,
            s.active.id,
            ctx.inputs.dense.shape[1],
            s.model.source.out_dim,
            secure_config(ctx, ctx.inputs),
            s.train.seed,
        )
        self.lr = s.model.source.lr or s.train.lr  # B builds the rate into [[lr G]]
        self.updater = ctx.local_updater(self.local_update)

    def run(self) -> dict:
        plan = self.ctx.plan
        try:
            self.src.setup("src")
            with self.updater:
                for rnd, _, rows in plan.batches():
                    tag = f"train/r{rnd}"
                    x = features(self.ctx.inputs, rows)
                    self.src.forward(tag, x)
                    m3 = self.src.backward(tag, self.lr, x)
                    self.updater.record_round(rnd, rows, m3)
                    if plan.validates_at(rnd):
                        self.src.forward(
                            f"val/r{rnd}", features(self.ctx.val_inputs, plan.val_rows)
                        )
        finally:
            self.src.close()
        return {"rounds": plan.total_rounds, "local_updates": self.updater.num_local_updates}

    def local_update(self, batch_id: int, entry: CachedBatch, t: int) -> None:
        self.src.backward_cached(
            entry.derivative, features(self.ctx.inputs, entry.activation), self.lr
        )
