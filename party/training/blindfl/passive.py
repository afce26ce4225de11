"""A passive party of `protocol: blindfl`: its dense features in the MatMul layer, its
categorical fields in the Embed-MatMul layer; it only ever sees ciphertexts."""

from __future__ import annotations

from typing import Any

import numpy as np
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
from vfl.party.training.context import RoleContext, ScoresInTurn, train_rounds
from vfl.party.training.inputs import Inputs
from vfl.proto import common_pb2
from vfl.secure.paillier.keys import KeyPair, generate_keypair
from vfl.secure.source_layers.embed import PassiveEmbedLayer
from vfl.secure.source_layers.matmul import PassiveSourceLayer
from vfl.secure.source_layers.matmul.bfv import PassiveBfvLayer
from vfl.secure.source_layers.state import keypair_state
from vfl.secure.source_layers.steps import feature_step_factors
from vfl.secure.wire.payload import layer_setup_to_payload


class BlindPassiveTrainer(ScoresInTurn):
    """A passive party: dense features in the MatMul layer, categorical fields in the
    Embed-MatMul layer (each only when the party has such inputs)."""

    def __init__(self, ctx: RoleContext) -> None:
        s, src = ctx.spec, ctx.spec.model.source
        self.ctx = ctx
        self.config = secure_config(ctx, ctx.inputs)
        check_bfv_range(ctx, ctx.inputs, self.config)
        if ctx.inputs.empty:
            raise JobError(f"party '{ctx.party_id}' has no features to train on")
        self.keypair: KeyPair | None = None  # shared by both layers
        self.src: PassiveSourceLayer | PassiveBfvLayer | None = None
        self.embed: PassiveEmbedLayer | None = None
        self.row_sets = RowSets(ctx.plan)  # row sets whose m1 came once, at setup
        self.lr = src.lr or s.train.lr  # B builds the rate into [[lr G]]
        self.updater = ctx.local_updater(self.local_update)

    def setup(self) -> None:
        """Generate this party's key pair, exchange keys and set up the source layers (the
        KEYING stage)."""
        self._build(generate_keypair(self.ctx.party_id, self.config))
        inputs = self.ctx.inputs
        layout = common_pb2.InputLayout(dense=inputs.width, vocab_sizes=list(inputs.cardinalities))
        self.ctx.channel.send(
            self.ctx.spec.active.id, "layout", layer_setup_to_payload(layout=layout)
        )
        if self.src is not None:
            self.src.setup("src")
            src = self.src
            self.row_sets.precompute(
                src, lambda name, rows: src.precompute("src/rows", name, len(rows))
            )
        if self.embed is not None:
            self.embed.setup("emb")

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from a `state_dict()` instead of `setup()`: the key pair, the layers'
        shares and the active party's key come from the checkpoint; nothing is exchanged.

        Raises:
            CheckpointError: the checkpoint holds other layers than this party runs.
            StateError, PaillierKeyError: a layer's saved state does not fit it.
        """
        self.load_model(state)
        if self.src is not None and state.get("rows"):
            self.src.load_rows_state(state["rows"])
            self.row_sets.names = set(state["rows"])
        self.updater.load_state_dict(state["updater"])

    def load_model(self, state: dict[str, Any]) -> None:
        """Load the key pair and the layers' shares and keys of a `state_dict()` (to score
        with them; nothing is exchanged)."""
        self.config = trained_config(self.config, state)
        self._build(saved_keypair(self.ctx, self.config, state))
        load_layer(self.ctx, "src", self.src, state)
        load_layer(self.ctx, "embed", self.embed, state)

    def state_dict(self) -> dict[str, Any]:
        """Key pair, both layers' state and the local-update state (a checkpoint)."""
        if self.keypair is None:
            raise JobError("a blindfl trainer has no state before setup() or restore()")
        return {
            "keypair": keypair_state(self.keypair),
            "feature_bits": self.config.feature_bits,
            "src": None if self.src is None else self.src.state_dict(),
            "rows": None if self.src is None else self.src.rows_state(),
            "embed": None if self.embed is None else self.embed.state_dict(),
            "updater": self.updater.state_dict(),
        }

    def _build(self, keypair: KeyPair) -> None:
        """The layers this party's inputs call for, under `keypair`."""
        ctx, s, src = self.ctx, self.ctx.spec, self.ctx.spec.model.source
        self.keypair, d = keypair, ctx.inputs.width
        if d > 0 and s.crypto.scheme == "bfv":
            self.src = PassiveBfvLayer(
                ctx.channel, s.active.id, d, src.out_dim, self.config, s.train.seed,
                bfv_params(s, self.config), step_factors=self._step_factors(),
            )  # fmt: skip
            self.src.on_decrypt = ctx.view.decrypted if ctx.view.recording else None
        elif d > 0:
            self.src = PassiveSourceLayer(
                ctx.channel,
                s.active.id,
                d,
                src.out_dim,
                self.config,
                s.train.seed,
                keypair=keypair,
                step_factors=self._step_factors(),
            )
            self.src.on_decrypt = ctx.view.decrypted if ctx.view.recording else None
        if ctx.inputs.cat is not None:
            self.embed = PassiveEmbedLayer(
                ctx.channel,
                s.active.id,
                list(ctx.inputs.cardinalities),
                src.embedding_dim,
                src.out_dim,
                self.config,
                s.train.seed,
                keypair=keypair,
            )
            self.embed.on_decrypt = ctx.view.decrypted if ctx.view.recording else None

    def _step_factors(self) -> np.ndarray | None:
        """This party's per-feature step factors from its own training rows (plain SGD:
        none); see `secure.source_layers.steps`. They never leave this party."""
        if self.ctx.spec.train.optimizer == "sgd" or not len(self.ctx.plan.train_rows):
            return None
        return feature_step_factors(features(self.ctx.inputs, self.ctx.plan.train_rows))

    def run(self) -> dict:
        result = train_rounds(self.ctx, self.updater, self.step, self.validate, self.state_dict)
        if self.src is not None and self.ctx.view.recording:  # its plaintext X_A U_A
            every = np.arange(self.ctx.inputs.rows)
            plain = features(self.ctx.inputs, every) @ self.src.own_share()
            self.ctx.view.record("final", {"representation": np.asarray(plain)})
        return result

    def close(self) -> None:
        close_layers(self.src, self.embed)

    def step(self, rnd: int, rows: np.ndarray) -> None:
        m3 = self._round(f"train/r{rnd}", self.ctx.inputs, rows, "train")
        self.updater.record_round(rnd, rows, m3)
        self.ctx.view.record(f"train/r{rnd}", {"rows": rows})

    def validate(self, rnd: int) -> None:
        self._round(f"val/r{rnd}", self.ctx.val_inputs, self.ctx.plan.val_rows, "val")

    def score(self, tag: str, inputs: Inputs, rows: np.ndarray) -> None:
        """This party's half of the secure forward for `rows` of `inputs`."""
        self._round(tag, inputs, rows)

    def _round(self, tag: str, inputs: Inputs, rows: np.ndarray, row_set: str | None = None):
        """One forward (and for `row_set` "train" the backward) of `rows` of `inputs`."""
        x = features(inputs, rows)
        if self.src is not None:
            self.src.forward(tag, x, self.row_sets.ref(row_set, rows))
        if self.embed is not None:
            self.embed.forward(f"{tag}/emb", inputs.codes(rows))
        if row_set != "train":
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
