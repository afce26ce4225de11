"""The active party in split mode: own bottom model, top model, loss, derivatives, metrics.

Local updates (CELU / FedBCD) rerun the top model on cached passive activations and
weight each instance by the cosine between the fresh and the cached derivative.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch
from vfl.celu.weighting import active_local_loss
from vfl.celu.workset import CachedBatch
from vfl.party.training.context import RoleContext, ScoresInTurn, train_rounds
from vfl.party.training.inputs import Inputs
from vfl.party.training.nets import (
    leaf_grad,
    make_optimizer,
    seeded_bottom,
    seeded_mlp,
    set_output_bias,
)
from vfl.party.training.plan import in_chunks
from vfl.party.training.split.defence import GradientNoise, randomised_labels
from vfl.party.training.task import Labels, Task
from vfl.secure.wire.payload import tensor_from_payload, tensor_to_payload


class ActiveTrainer(ScoresInTurn):
    def __init__(self, ctx: RoleContext, labels: Labels, task: Task) -> None:
        s = ctx.spec
        self.ctx, self.task = ctx, task
        self.passives = [p.id for p in s.passives]
        src = s.model.source
        self.width = src.out_dim
        defence = s.defence
        if defence is not None and defence.label_epsilon is not None and labels.train is not None:
            noisy = randomised_labels(
                labels.train, ctx.plan.train_rows, defence.label_epsilon, s.train.seed
            )
            labels = Labels(noisy, labels.val)  # trains on them; validates on the true ones
        self.noise = GradientNoise(defence, s.train.seed)
        self.labels = labels
        self.bottom = (
            None
            if ctx.inputs.empty
            else seeded_bottom(
                s.train.seed, ctx.party_id, ctx.inputs, src.embedding_dim, src.hidden, self.width
            )
        )
        top_in = self.width * (len(self.passives) + int(self.bottom is not None))
        self.top = seeded_mlp(s.train.seed, "top", top_in, s.model.top.hidden, task.out_dim)
        if labels.train is not None:  # training starts from the label prior
            set_output_bias(self.top, task.output_bias(labels.of(ctx.plan.train_rows)))
        params = list(self.top.parameters())
        if self.bottom is not None:
            params += list(self.bottom.parameters())
        self.opt = make_optimizer(s.train.optimizer, params, s.train.lr)
        self.updater = ctx.local_updater(self.local_update)
        self.xi = self.updater.config.effective_xi
        self.started = time.monotonic()
        self.val_seconds = 0.0
        self.metrics: dict[str, float] = {}
        self.history: list[dict] = []
        self.val_outputs: np.ndarray | None = None  # the model's outputs at the last validation

    def setup(self) -> None:
        """Nothing to set up: split learning has no keys."""

    def close(self) -> None:
        """Nothing to release."""

    def run(self) -> dict:
        result = train_rounds(self.ctx, self.updater, self.step, self.validate, self.state_dict)
        return {
            **result,
            "metrics": self.metrics,
            "history": self.history,
            "validation_outputs": self.val_outputs,
        }

    def state_dict(self) -> dict[str, Any]:
        """Models, optimiser, local-update state and validations so far (a checkpoint)."""
        return {
            "bottom": None if self.bottom is None else self.bottom.state_dict(),
            "top": self.top.state_dict(),
            "opt": self.opt.state_dict(),
            "updater": self.updater.state_dict(),
            "metrics": dict(self.metrics),
            "history": list(self.history),
        }

    def load_model(self, state: dict[str, Any]) -> None:
        """Load the models of a `state_dict()` (to score with them)."""
        if self.bottom is not None:
            self.bottom.load_state_dict(state["bottom"])
        self.top.load_state_dict(state["top"])

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from a `state_dict()` (instead of `setup()`)."""
        self.load_model(state)
        self.opt.load_state_dict(state["opt"])
        self.updater.load_state_dict(state["updater"])
        self.metrics, self.history = dict(state["metrics"]), list(state["history"])

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

    def _forward(self, rows: np.ndarray, acts: list[torch.Tensor], inputs=None) -> torch.Tensor:
        parts = list(acts)
        if self.bottom is not None:
            parts.insert(0, self.bottom((inputs or self.ctx.inputs).take(rows)))
        return self.top(torch.cat(parts, dim=1))

    def step(self, rnd: int, rows: np.ndarray) -> float:
        acts = self._recv_acts(f"train/r{rnd}/act", len(rows))
        with self.ctx.lock:
            leaves = [a.clone().requires_grad_(True) for a in acts]
            loss = self.task.losses(self._forward(rows, leaves), self.labels.of(rows)).mean()
            self.opt.zero_grad()
            loss.backward()
            grads = [self.noise(leaf_grad(a)) for a in leaves]
            self.opt.step()
        for p, g in zip(self.passives, grads, strict=True):
            self.ctx.channel.send(p, f"train/r{rnd}/grad", tensor_to_payload(g.numpy()))
        self.updater.record_round(rnd, (rows, acts), grads)
        seen = {f"act_{p}": a for p, a in zip(self.passives, acts, strict=True)}
        seen.update({f"grad_{p}": g for p, g in zip(self.passives, grads, strict=True)})
        self.ctx.view.record(f"train/r{rnd}", {"rows": rows, **seen})
        return float(loss.detach())

    def local_update(self, batch_id: int, entry: CachedBatch, t: int) -> None:
        rows, acts = entry.activation
        leaves = [a.clone().requires_grad_(True) for a in acts]
        losses = self.task.losses(self._forward(rows, leaves), self.labels.of(rows))
        loss, _ = active_local_loss(losses, leaves, entry.derivative, self.xi)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()

    def validate(self, rnd: int) -> None:
        """Validate with local updates paused; its time is left out of `train_seconds`."""
        begun = time.monotonic()
        rows = self.ctx.plan.val_rows
        chunks = in_chunks(f"val/r{rnd}", rows, self.ctx.spec.model.source.out_dim)
        with self.ctx.lock:
            out = np.concatenate(list(self.score_batches(self.ctx.val_inputs, chunks)))
        self.metrics = self.task.evaluate(out, self.labels.of(rows, validation=True))
        self.val_outputs = out
        self.history.append(history_entry(self, rnd, begun))
        self.ctx.reporter.validation(rnd, self.metrics)

    def score(self, tag: str, inputs: Inputs, rows: np.ndarray) -> np.ndarray:
        """The model's outputs for `rows` of `inputs`, with the passive parties' `score`."""
        acts = self._recv_acts(f"{tag}/act", len(rows))
        with torch.no_grad():
            return self._forward(rows, acts, inputs).numpy()


def history_entry(trainer, rnd: int, validation_began: float) -> dict:
    """One validation record: round, wall seconds, seconds spent training, metrics."""
    now = time.monotonic()
    entry = {
        "round": rnd,
        "seconds": round(now - trainer.started, 3),
        "train_seconds": round(validation_began - trainer.started - trainer.val_seconds, 3),
        "local_updates": trainer.updater.num_local_updates,
        **trainer.metrics,
    }
    trainer.val_seconds += now - validation_began
    return entry
