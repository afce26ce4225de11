"""The active party of `protocol: blindfl`: Z from the source layers, the top model, the
loss and its derivative dL/dZ back into the layers; CELU on cached (Z, G).

The top model sees Z and, beside it, B's own plaintext bottom over its own features
(nothing of it leaves B), unless the top is the identity. That bottom is as wide as split
learning's whole cut layer, out_dim per party (`side_width`): Z sums every party's
contribution in out_dim columns, and with a bottom only out_dim wide the model learned
more slowly than split's (docs/protocols.md §5, "Composition"). The MatMul layer's steps
follow the spec's optimiser (`secure.source_layers.steps`)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn
from vfl.celu.weighting import active_local_loss
from vfl.celu.workset import CachedBatch
from vfl.party.errors import JobError
from vfl.party.training.blindfl.common import (
    RowSets,
    bfv_params,
    check_bfv_range,
    close_layers,
    features,
    load_layer,
    saved_keypair,
    secure_config,
    trained_config,
)
from vfl.party.training.context import RoleContext, train_rounds
from vfl.party.training.inputs import Inputs
from vfl.party.training.nets import (
    leaf_grad,
    make_optimizer,
    mlp_forward,
    seeded_mlp,
    set_output_bias,
)
from vfl.party.training.split.active import history_entry
from vfl.party.training.task import Labels, Task
from vfl.secure.paillier.keys import KeyPair, generate_keypair
from vfl.secure.source_layers.embed import ActiveEmbedLayer
from vfl.secure.source_layers.matmul import ActiveSourceLayer
from vfl.secure.source_layers.matmul.bfv import ActiveBfvLayer
from vfl.secure.source_layers.state import keypair_state
from vfl.secure.source_layers.steps import SourceOptimizer
from vfl.secure.wire.payload import layer_setup_from_payload

SCORE_AHEAD = 1  # batches whose m1 is out while B decrypts the m2 of an earlier one


def side_width(out_dim: int, parties: int) -> int:
    """The width of B's own bottom beside Z: split's cut layer over all `parties`."""
    return out_dim * parties


def _out_width(state: dict[str, Any]) -> int:
    """The output width of a saved `seeded_mlp` (its last linear layer's rows)."""
    last = max((k for k in state if k.endswith(".weight")), key=lambda k: int(k.split(".")[0]))
    return int(state[last].shape[0])


class BlindActiveTrainer:
    def __init__(self, ctx: RoleContext, labels: Labels, task: Task) -> None:
        s = ctx.spec
        self.ctx, self.task = ctx, task
        self.labels = labels
        h = s.model.source.out_dim
        self.config = secure_config(ctx, ctx.inputs)
        check_bfv_range(ctx, ctx.inputs, self.config)
        self.keypair: KeyPair | None = None  # shared by both layers
        self.layouts: dict[str, dict[str, Any]] = {}  # each passive party's inputs
        self.src: ActiveSourceLayer | ActiveBfvLayer | None = None
        self.embed: ActiveEmbedLayer | None = None
        self.own: nn.Sequential | None = None  # B's own features when no passive has dense ones
        self.side: nn.Sequential | None = None  # B's own bottom, beside Z at the top's input
        self.row_sets = RowSets(ctx.plan)  # row sets whose m1 went out once, at setup
        self.opt: torch.optim.Optimizer | None = None
        self.identity = not s.model.top.hidden and h == task.out_dim
        self.top: nn.Module = nn.Identity()  # `_build` makes it
        self.src_lr = s.model.source.lr or s.train.lr
        self.updater = ctx.local_updater(self.local_update)
        self.xi = self.updater.config.effective_xi
        self.metrics: dict[str, float] = {}
        self.history: list[dict] = []
        self.val_outputs: np.ndarray | None = None  # the model's outputs at the last validation

    def run(self) -> dict:
        self.started, self.val_seconds = time.monotonic(), 0.0
        result = train_rounds(self.ctx, self.updater, self.step, self.validate, self.state_dict)
        return {
            **result,
            "metrics": self.metrics,
            "history": self.history,
            "validation_outputs": self.val_outputs,
        }

    def close(self) -> None:
        close_layers(self.src, self.embed)

    def setup(self) -> None:
        """Generate this party's key pair, exchange keys and set up the source layers (the
        KEYING stage)."""
        ch = self.ctx.channel
        layouts = {}
        for p in self.ctx.spec.passives:
            lay = layer_setup_from_payload(ch.recv(p.id, "layout", self.ctx.timeout), "layout")
            layouts[p.id] = {"dense": int(lay.dense), "vocab": [int(v) for v in lay.vocab_sizes]}
        self._build(layouts, generate_keypair(self.ctx.party_id, self.config))
        self._make_optimizer()
        if self.src is not None:
            self.src.setup("src")
        self._start_from_prior()
        if self.src is not None:
            src, inputs = self.src, {"train": self.ctx.inputs, "val": self.ctx.val_inputs}
            self.row_sets.precompute(
                src,
                lambda name, rows: src.precompute("src/rows", name, features(inputs[name], rows)),
            )
        if self.embed is not None:
            self.embed.setup("emb")

    def _start_from_prior(self) -> None:
        """The output's initial bias from the training labels (`Task.output_bias`), as in
        split learning: the top's output layer, or with an identity top the bias of Z
        (the MatMul layer's b, else B's own linear part)."""
        bias = self.task.output_bias(self.labels.of(self.ctx.plan.train_rows))
        if not self.identity:
            set_output_bias(self.top, bias)  # type: ignore[arg-type]
        elif self.src is not None:
            self.src.set_bias(bias)
        elif self.own is not None:
            set_output_bias(self.own, bias)

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from a `state_dict()` instead of `setup()`: the key pair, the passive
        parties' layouts and keys, the layers' shares, the top model (and B's own part),
        the optimiser and the local-update state come from the checkpoint; nothing is
        exchanged.

        Raises:
            CheckpointError: the checkpoint holds other layers than the layouts call for.
            StateError, PaillierKeyError: a layer's saved state does not fit it.
        """
        self.load_model(state)
        if self.src is not None and state.get("rows"):
            self.src.load_rows_state(state["rows"])
            self.row_sets.names = set(state["rows"])
        self._make_optimizer()
        if self.opt is not None:
            self.opt.load_state_dict(state["opt"])
        self.updater.load_state_dict(state["updater"])
        self.metrics, self.history = dict(state["metrics"]), list(state["history"])

    def load_model(self, state: dict[str, Any]) -> None:
        """Load the key pair, the passive parties' layouts and keys, the layers' shares, the
        top model and B's own part of a `state_dict()` (to score with them; nothing is
        exchanged)."""
        self.config = trained_config(self.config, state)
        side = None if state.get("side") is None else _out_width(state["side"])
        self._build(dict(state["layouts"]), saved_keypair(self.ctx, self.config, state), side)
        load_layer(self.ctx, "src", self.src, state)
        load_layer(self.ctx, "embed", self.embed, state)
        if self.own is not None:
            self.own.load_state_dict(state["own"])
        if self.side is not None:
            self.side.load_state_dict(state["side"])
        self.top.load_state_dict(state["top"])

    def state_dict(self) -> dict[str, Any]:
        """Key pair, layouts, both layers' state, top model, B's own part, optimiser,
        local-update state and validations so far (a checkpoint)."""
        if self.keypair is None:
            raise JobError("a blindfl trainer has no state before setup() or restore()")
        return {
            "keypair": keypair_state(self.keypair),
            "feature_bits": self.config.feature_bits,
            "layouts": self.layouts,
            "src": None if self.src is None else self.src.state_dict(),
            "rows": None if self.src is None else self.src.rows_state(),
            "embed": None if self.embed is None else self.embed.state_dict(),
            "own": None if self.own is None else self.own.state_dict(),
            "side": None if self.side is None else self.side.state_dict(),
            "top": self.top.state_dict(),
            "opt": None if self.opt is None else self.opt.state_dict(),
            "updater": self.updater.state_dict(),
            "metrics": dict(self.metrics),
            "history": list(self.history),
        }

    def _build(
        self, layouts: dict[str, dict[str, Any]], keypair: KeyPair, side_dim: int | None = None
    ) -> None:
        """The layers the passive parties' layouts call for, under `keypair`; B's own
        linear part when no passive party has dense columns, else its own bottom beside
        Z (unless the top is the identity; `side_dim` wide, by default `side_width`:
        a saved model keeps the width it was trained with); the top model."""
        ch, s, config = self.ctx.channel, self.ctx.spec, self.config
        self.keypair, self.layouts = keypair, layouts
        passives = [p.id for p in s.passives]
        dense_ids = [pid for pid in passives if layouts[pid]["dense"] > 0]
        h, d_b, seed = s.model.source.out_dim, self.ctx.inputs.width, s.train.seed
        if dense_ids:
            opt = SourceOptimizer(s.train.optimizer)
            if s.crypto.scheme == "bfv":
                rows = s.train.batch_size
                bfv = bfv_params(s, config)
                self.src = ActiveBfvLayer(ch, dense_ids, d_b, h, config, seed, bfv, rows, opt)
            else:
                self.src = ActiveSourceLayer(
                    ch, dense_ids, d_b, h, config, seed, keypair=keypair, optimizer=opt
                )
        else:
            self.own = seeded_mlp(seed, self.ctx.party_id, d_b, (), h)
        side = bool(dense_ids) and d_b > 0 and not self.identity
        width = side_dim or side_width(h, len(s.parties))
        if side:
            salt = f"{self.ctx.party_id}/side"
            self.side = seeded_mlp(seed, salt, d_b, s.model.source.hidden, width)
        if not self.identity:
            top_in = h + (width if side else 0)
            self.top = seeded_mlp(seed, "top", top_in, s.model.top.hidden, self.task.out_dim)
        fields = {pid: list(layouts[pid]["vocab"]) for pid in passives if layouts[pid]["vocab"]}
        if fields:
            emb = s.model.source.embedding_dim
            self.embed = ActiveEmbedLayer(
                ch, list(fields), fields, emb, h, config, seed, keypair=keypair
            )

    def _make_optimizer(self) -> None:
        """The optimiser of the top model and B's own part, for training (scoring needs
        none, and creating the first one in a process imports much of torch)."""
        s = self.ctx.spec
        params = [
            p for m in (self.top, self.own, self.side) if m is not None for p in m.parameters()
        ]
        self.opt = make_optimizer(s.train.optimizer, params, s.train.lr) if params else None

    def _z(
        self, tag: str, inputs: Inputs, rows: np.ndarray, row_set: str | None = None
    ) -> torch.Tensor:
        """Z from the secure layers (B's own linear part is added in `_top_step`);
        `row_set`: the set ("train", "val") `rows` index, if its m1 went out at setup."""
        if self.src is not None:
            ref = self.row_sets.ref(row_set, rows)
            self.src.start_forward(tag, features(inputs, rows), ref)
        return self._finish_z(tag, len(rows))

    def _finish_z(self, tag: str, n: int) -> torch.Tensor:
        """Z of a step whose MatMul m1 went out (`start_forward`), if there is that layer."""
        z = np.zeros((n, self.ctx.spec.model.source.out_dim))
        if self.src is not None:
            z = z + self.src.finish_forward(tag)
        if self.embed is not None:
            z = z + self.embed.forward(f"{tag}/emb")
        return torch.from_numpy(z).float()

    def _out(self, z: torch.Tensor, inputs: Inputs, rows: np.ndarray) -> torch.Tensor:
        if self.own is not None:
            z = z + mlp_forward(self.own, inputs.take(rows)[0])
        if self.side is not None:
            z = torch.cat([z, mlp_forward(self.side, inputs.take(rows)[0])], dim=1)
        return self.top(z)

    def _top_step(self, z: torch.Tensor, rows: np.ndarray, cached_g=None):
        """One update of the top model (and B's own part) on Z; returns (loss, dL/dZ)."""
        leaf = z.clone().requires_grad_(True)
        losses = self.task.losses(self._out(leaf, self.ctx.inputs, rows), self.labels.of(rows))
        if cached_g is None:
            loss = losses.mean()
        else:
            loss, _ = active_local_loss(losses, leaf, cached_g, self.xi)
        if self.opt is not None:
            self.opt.zero_grad()
        loss.backward()
        if self.opt is not None:
            self.opt.step()
        return float(loss.detach()), leaf_grad(leaf)

    def step(self, rnd: int, rows: np.ndarray) -> float:
        tag = f"train/r{rnd}"
        z = self._z(tag, self.ctx.inputs, rows, "train")
        with self.ctx.lock:
            loss, grad = self._top_step(z, rows)
        g = grad.double().numpy()
        if isinstance(self.src, ActiveBfvLayer) and rnd < self.ctx.plan.total_rounds:
            ahead = self.ctx.plan.round_rows(rnd + 1)  # its m1 goes out while A steps
            self.src.forward_ahead(f"train/r{rnd + 1}", features(self.ctx.inputs, ahead))
        if self.src is not None:
            self.src.backward(tag, g, self.src_lr)
        if self.embed is not None:
            self.embed.backward(f"{tag}/emb", g, self.src_lr)
        self.updater.record_round(rnd, (rows, z), grad)
        self.ctx.view.record(f"train/r{rnd}", {"rows": rows, "z": z, "g": g})
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
            out = self.score(f"val/r{rnd}", self.ctx.val_inputs, rows, "val")
        self.metrics = self.task.evaluate(out, self.labels.of(rows, validation=True))
        self.val_outputs = out
        self.history.append(history_entry(self, rnd, begun))
        self.ctx.reporter.validation(rnd, self.metrics)

    def score(
        self, tag: str, inputs: Inputs, rows: np.ndarray, row_set: str | None = None
    ) -> np.ndarray:
        """The model's outputs for `rows` of `inputs` (the secure forward, with the passive
        parties' `score`)."""
        z = self._z(tag, inputs, rows, row_set)
        with torch.no_grad():
            return self._out(z, inputs, rows).numpy()

    def score_batches(
        self, inputs: Inputs, batches: Sequence[tuple[str, np.ndarray]]
    ) -> Iterator[np.ndarray]:
        """`score` of each (tag, rows), pipelined: the MatMul layer's m1 of the next
        `SCORE_AHEAD` batches goes out before this batch's m2 is decrypted, so that the
        passive parties decrypt and re-randomise while B decrypts. Each batch exchanges
        the messages of `score`, in the same order per layer."""
        started: deque[tuple[str, np.ndarray]] = deque()
        for tag, rows in batches:
            if self.src is not None:
                self.src.start_forward(tag, features(inputs, rows))
            started.append((tag, rows))
            if len(started) > SCORE_AHEAD:
                yield self._finish_score(inputs, *started.popleft())
        while started:
            yield self._finish_score(inputs, *started.popleft())

    def _finish_score(self, inputs: Inputs, tag: str, rows: np.ndarray) -> np.ndarray:
        z = self._finish_z(tag, len(rows))
        with torch.no_grad():
            return self._out(z, inputs, rows).numpy()
