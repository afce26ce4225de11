"""A passive party in split mode: its bottom model, activations out, derivatives in.

Tags: `train/r{round}/act` (sent), `train/r{round}/grad` (received), `val/r{round}/act`.
Local updates (CELU / FedBCD) re-apply cached derivatives, weighted by the cosine between
the fresh and the cached activation (docs/protocols.md §6).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from vfl.celu.weighting import passive_local_derivative
from vfl.celu.workset import CachedBatch
from vfl.party.training.context import RoleContext, ScoresInTurn, train_rounds
from vfl.party.training.inputs import Inputs
from vfl.party.training.nets import make_optimizer, seeded_bottom
from vfl.party.training.plan import in_chunks
from vfl.secure.wire.payload import tensor_from_payload, tensor_to_payload


class PassiveTrainer(ScoresInTurn):
    def __init__(self, ctx: RoleContext) -> None:
        s = ctx.spec
        self.ctx = ctx
        self.active = s.active.id
        src = s.model.source
        self.bottom = seeded_bottom(
            s.train.seed, ctx.party_id, ctx.inputs, src.embedding_dim, src.hidden, src.out_dim
        )
        self.opt = make_optimizer(s.train.optimizer, self.bottom.parameters(), s.train.lr)
        self.updater = ctx.local_updater(self.local_update)
        self.xi = self.updater.config.effective_xi

    def setup(self) -> None:
        """Nothing to set up: split learning has no keys."""

    def close(self) -> None:
        """Nothing to release."""

    def run(self) -> dict:
        result = train_rounds(self.ctx, self.updater, self.step, self.validate, self.state_dict)
        if self.ctx.view.recording:  # its own trained bottom on its own rows
            with torch.no_grad():
                out = self.bottom(self.ctx.inputs.take(np.arange(self.ctx.inputs.rows)))
            self.ctx.view.record("final", {"representation": out})
        return result

    def state_dict(self) -> dict[str, Any]:
        """Bottom model, optimiser and local-update state (a checkpoint)."""
        return {
            "bottom": self.bottom.state_dict(),
            "opt": self.opt.state_dict(),
            "updater": self.updater.state_dict(),
        }

    def load_model(self, state: dict[str, Any]) -> None:
        """Load the bottom model of a `state_dict()` (to score with it)."""
        self.bottom.load_state_dict(state["bottom"])

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from a `state_dict()` (instead of `setup()`)."""
        self.load_model(state)
        self.opt.load_state_dict(state["opt"])
        self.updater.load_state_dict(state["updater"])

    def step(self, rnd: int, rows: np.ndarray) -> None:
        ch, lock = self.ctx.channel, self.ctx.lock
        with lock:
            act = self.bottom(self.ctx.inputs.take(rows))
        sent = act.detach()
        ch.send(self.active, f"train/r{rnd}/act", tensor_to_payload(sent.numpy()))
        grad = torch.from_numpy(
            tensor_from_payload(
                ch.recv(self.active, f"train/r{rnd}/grad", self.ctx.timeout),
                shape=tuple(act.shape),
                dtype="float32",
            )
        )
        with lock:
            if self.updater.uses_worker:  # the worker may have stepped since the forward
                act = self.bottom(self.ctx.inputs.take(rows))
            self.opt.zero_grad()
            act.backward(grad)
            self.opt.step()
        # Cache the activation the derivative was computed for (the one sent), not the
        # recomputed one: the worker may have stepped in between, and the cosine weighting
        # of later local updates must measure drift from what the active party saw.
        self.updater.record_round(rnd, (rows, sent), grad)
        self.ctx.view.record(f"train/r{rnd}", {"rows": rows, "act": sent, "grad": grad})

    def local_update(self, batch_id: int, entry: CachedBatch, t: int) -> None:
        rows, cached_act = entry.activation
        fresh = self.bottom(self.ctx.inputs.take(rows))
        derivative, _ = passive_local_derivative(fresh, cached_act, entry.derivative, self.xi)
        self.opt.zero_grad()
        fresh.backward(derivative)
        self.opt.step()

    def validate(self, rnd: int) -> None:
        """The activations of the validation rows, in chunks (`in_chunks`)."""
        width = self.ctx.spec.model.source.out_dim
        with self.ctx.lock:  # local updates pause while validating
            chunks = in_chunks(f"val/r{rnd}", self.ctx.plan.val_rows, width)
            for _ in self.score_batches(self.ctx.val_inputs, chunks):
                pass

    def score(self, tag: str, inputs: Inputs, rows: np.ndarray) -> None:
        """Send the activations of `rows` of `inputs` for the active party's `score`."""
        with torch.no_grad():
            act = self.bottom(inputs.take(rows))
        self.ctx.channel.send(self.active, f"{tag}/act", tensor_to_payload(act.numpy()))
