"""`protocol: blindfl` (DESIGN.md §5): federated source layers, then B's top model.

No party holds a plaintext model over another's features. Passive parties' dense features
go through the MatMul source layer (`secure.source_layers.matmul`), their categorical fields
(`data.categorical`) through the Embed-MatMul layer (`secure.source_layers.embed`); B learns
Z = X_A W_A + X_B W_B + b (+ Z_emb) and runs the top model in plaintext; passive parties
only ever see ciphertexts. At setup each passive party tells B its layout (sizes only).

Local updates (DESIGN.md §6, last bullet): B runs CELU in full on cached (Z, G): the top
model and its own share; a passive party re-applies cached encrypted steps [[lr G]] of the
MatMul layer homomorphically, with uniform sampling and weight 1.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn

from celu.weighting import active_local_loss
from celu.workset import CachedBatch
from party.errors import JobError
from party.training.context import RoleContext, train_rounds
from party.training.models import Inputs, make_optimizer, seeded_mlp
from party.training.split.active import history_entry
from party.training.task import Task
from secure.config import SecureConfig
from secure.paillier.keys import generate_keypair
from secure.source_layers.embed import ActiveEmbedLayer, PassiveEmbedLayer
from secure.source_layers.matmul import ActiveSourceLayer, PassiveSourceLayer
from secure.wire.payload import control_from_payload, control_to_payload

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
    """The dense rows as float64, CSR when sparse (the secure product then costs O(nnz))."""
    x = inputs.take(rows)[0].numpy().astype(np.float64)
    if x.size and np.count_nonzero(x) / x.size < SPARSE_DENSITY:
        return sp.csr_matrix(x)
    return x


def _close(*layers) -> None:
    for layer in layers:
        if layer is not None:
            layer.close()


class BlindActiveTrainer:
    def __init__(
        self, ctx: RoleContext, labels: np.ndarray, val_labels: np.ndarray, task: Task
    ) -> None:
        s = ctx.spec
        self.ctx, self.task = ctx, task
        self.y, self.val_y = task.encode(labels), task.encode(val_labels)
        h = s.model.source.out_dim
        self.config = secure_config(ctx, ctx.inputs)
        self.keypair = generate_keypair(ctx.party_id, self.config)  # shared by both layers
        self.src: ActiveSourceLayer | None = None
        self.embed: ActiveEmbedLayer | None = None
        self.own: nn.Module | None = None  # B's own features when no passive has dense ones
        identity = not s.model.top.hidden and h == task.out_dim
        self.top: nn.Module = (
            nn.Identity()
            if identity
            else seeded_mlp(s.train.seed, "top", h, s.model.top.hidden, task.out_dim)
        )
        self.src_lr = s.model.source.lr or s.train.lr
        self.updater = ctx.local_updater(self.local_update)
        self.xi = self.updater.config.effective_xi
        self.metrics: dict[str, float] = {}
        self.history: list[dict] = []

    def run(self) -> dict:
        try:
            self._setup()
            self.started, self.val_seconds = time.monotonic(), 0.0
            result = train_rounds(self.ctx, self.updater, self.step, self.validate)
        finally:
            _close(self.src, self.embed)
        return {**result, "metrics": self.metrics, "history": self.history}

    def _setup(self) -> None:
        ch, s = self.ctx.channel, self.ctx.spec
        layouts = {
            p.id: control_from_payload(
                ch.recv(p.id, "layout", self.ctx.timeout), ["dense", "vocab"]
            )
            for p in s.passives
        }
        dense_ids = [pid for pid, lay in layouts.items() if int(lay["dense"]) > 0]
        h, d_b = s.model.source.out_dim, self.ctx.inputs.dense.shape[1]
        if dense_ids:
            self.src = ActiveSourceLayer(
                ch, dense_ids, d_b, h, self.config, s.train.seed, keypair=self.keypair
            )
            self.src.setup("src")
        else:
            self.own = seeded_mlp(s.train.seed, self.ctx.party_id, d_b, (), h)
        fields = {
            pid: [int(v) for v in lay["vocab"].split(",")]
            for pid, lay in layouts.items()
            if lay["vocab"]
        }
        if fields:
            self.embed = ActiveEmbedLayer(
                ch,
                list(fields),
                fields,
                s.model.source.embedding_dim,
                h,
                self.config,
                s.train.seed,
                keypair=self.keypair,
            )
            self.embed.setup("emb")
        params = list(self.top.parameters()) + (
            list(self.own.parameters()) if self.own is not None else []
        )
        self.opt = make_optimizer(s.train.optimizer, params, s.train.lr) if params else None

    def _z(self, tag: str, inputs: Inputs, rows: np.ndarray) -> torch.Tensor:
        """Z from the secure layers (B's own linear part is added in `_top_step`)."""
        z = np.zeros((len(rows), self.ctx.spec.model.source.out_dim))
        if self.src is not None:
            z = z + self.src.forward(tag, features(inputs, rows))
        if self.embed is not None:
            z = z + self.embed.forward(f"{tag}/emb")
        return torch.from_numpy(z).float()

    def _out(self, z: torch.Tensor, inputs: Inputs, rows: np.ndarray) -> torch.Tensor:
        if self.own is not None:
            z = z + self.own(inputs.take(rows)[0])
        return self.top(z)

    def _top_step(self, z: torch.Tensor, rows: np.ndarray, cached_g=None):
        """One update of the top model (and B's own part) on Z; returns (loss, dL/dZ)."""
        leaf = z.clone().requires_grad_(True)
        losses = self.task.losses(self._out(leaf, self.ctx.inputs, rows), self.y[rows])
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
        z = self._z(tag, self.ctx.inputs, rows)
        with self.ctx.lock:
            loss, grad = self._top_step(z, rows)
        g = grad.double().numpy()
        if self.src is not None:
            self.src.backward(tag, g, self.src_lr)
        if self.embed is not None:
            self.embed.backward(f"{tag}/emb", g, self.src_lr)
        self.updater.record_round(rnd, (rows, z), grad)
        return loss

    def local_update(self, batch_id: int, entry: CachedBatch, t: int) -> None:
        rows, z = entry.activation
        _, grad = self._top_step(z, rows, entry.derivative)
        if self.src is not None:
            self.src.local_step(features(self.ctx.inputs, rows), grad.double().numpy(), self.src_lr)

    def validate(self, rnd: int) -> None:
        begun = time.monotonic()
        rows = self.ctx.plan.val_rows
        with self.ctx.lock:
            z = self._z(f"val/r{rnd}", self.ctx.val_inputs, rows)
            with torch.no_grad():
                out = self._out(z, self.ctx.val_inputs, rows).numpy()
        self.metrics = self.task.evaluate(out, self.val_y[rows])
        self.history.append(history_entry(self, rnd, begun))
        self.ctx.reporter.validation(rnd, self.metrics)


class BlindPassiveTrainer:
    """A passive party: dense features in the MatMul layer, categorical fields in the
    Embed-MatMul layer (each only when the party has such inputs)."""

    def __init__(self, ctx: RoleContext) -> None:
        s, src = ctx.spec, ctx.spec.model.source
        self.ctx = ctx
        config = secure_config(ctx, ctx.inputs)
        keypair = generate_keypair(ctx.party_id, config)
        d = ctx.inputs.dense.shape[1]
        if d == 0 and ctx.inputs.cat is None:
            raise JobError(f"party '{ctx.party_id}' has no features to train on")
        self.src = (
            None
            if d == 0
            else PassiveSourceLayer(
                ctx.channel, s.active.id, d, src.out_dim, config, s.train.seed, keypair=keypair
            )
        )
        self.embed = (
            None
            if ctx.inputs.cat is None
            else PassiveEmbedLayer(
                ctx.channel,
                s.active.id,
                list(ctx.inputs.cardinalities),
                src.embedding_dim,
                src.out_dim,
                config,
                s.train.seed,
                keypair=keypair,
            )
        )
        self.lr = src.lr or s.train.lr  # B builds the rate into [[lr G]]
        self.updater = ctx.local_updater(self.local_update)

    def run(self) -> dict:
        try:
            self._setup()
            return train_rounds(self.ctx, self.updater, self.step, self.validate)
        finally:
            _close(self.src, self.embed)

    def step(self, rnd: int, rows: np.ndarray) -> None:
        m3 = self._round(f"train/r{rnd}", self.ctx.inputs, rows, train=True)
        self.updater.record_round(rnd, rows, m3)

    def validate(self, rnd: int) -> None:
        self._round(f"val/r{rnd}", self.ctx.val_inputs, self.ctx.plan.val_rows)

    def _setup(self) -> None:
        inputs = self.ctx.inputs
        layout = {
            "dense": inputs.dense.shape[1],
            "vocab": ",".join(str(v) for v in inputs.cardinalities),
        }
        self.ctx.channel.send(self.ctx.spec.active.id, "layout", control_to_payload(layout))
        if self.src is not None:
            self.src.setup("src")
        if self.embed is not None:
            self.embed.setup("emb")

    def _round(self, tag: str, inputs: Inputs, rows: np.ndarray, train: bool = False):
        x = features(inputs, rows)
        if self.src is not None:
            self.src.forward(tag, x)
        if self.embed is not None:
            self.embed.forward(f"{tag}/emb", inputs.take(rows)[1].numpy())
        if not train:
            return None
        m3 = None if self.src is None else self.src.backward(tag, self.lr, x)
        if self.embed is not None:
            self.embed.backward(f"{tag}/emb", self.lr)
        return m3

    def local_update(self, batch_id: int, entry: CachedBatch, t: int) -> None:
        """Re-apply a cached [[lr G]] to the MatMul share with weight 1 (the Embed-MatMul
        step needs B's interaction, so it is not replayed)."""
        if self.src is not None and entry.derivative is not None:
            self.src.backward_cached(
                entry.derivative, features(self.ctx.inputs, entry.activation), self.lr
            )
