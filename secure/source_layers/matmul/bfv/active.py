"""The active party (B) of the BFV MatMul source layer: holds V_B, the bias and
[[U_B]]_A (A's key).

    setup     pk, params <-> A;  B -> A  v_a = [[V_A^(0)]]_B;  A -> B  u_b = [[U_B]]_A
    forward   B -> A  m1 = [[X_B U_B - R]]_A       (R: uniform mod t on every coefficient)
              A -> B  m2 = [[X_A V_A + X_A U_A + S]]_B   (S = Dec(m1) at the read positions)
              Z = Dec(m2) + R + X_B V_B + b
    backward  B -> A  m3 = [[eta G D]]_B (fresh, seeded)
              A -> B  vr = [[V_A + R_V]]_B (after A's update, flooded);  B -> A  vc = the
              same, decrypted and encrypted afresh on the weight support only

Every ciphertext that returns to its key's owner after a product by the other party's
plaintext (m1, m2, vr) is re-randomised and noise-flooded by its sender
(`BfvContext.flood`). One passive party (K = 1).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import vfl.secure.source_layers.matmul.bfv.common as shared
from vfl.secure.channel import Channel
from vfl.secure.config import SecureConfig
from vfl.secure.errors import ConfigError, SecureError, StateError
from vfl.secure.lattice.bfv import BfvContext, KeyPair, PeerKey, centered, encode, to_residues
from vfl.secure.lattice.params import BfvParams
from vfl.secure.source_layers.checks import check_features, check_lr, check_step
from vfl.secure.source_layers.common import Features
from vfl.secure.source_layers.matmul.bfv.setup import BfvLayerParams
from vfl.secure.source_layers.sharing import sample_share
from vfl.secure.source_layers.state import reading
from vfl.secure.source_layers.steps import SourceOptimizer
from vfl.secure.wire.payload import control_from_payload, control_to_payload

MAX_PENDING = 4  # forwards kept for a backward (validation forwards have none)


class ActiveBfvLayer(shared.NoRowSets):
    """B's side of the layer (see the module docstring)."""

    def __init__(
        self,
        channel: Channel,
        passive_ids: list[str],
        in_dim: int,
        out_dim: int,
        config: SecureConfig,
        seed: int,
        bfv: BfvParams | None = None,
        batch_rows: int = 256,
        optimizer: SourceOptimizer | str = "sgd",
    ) -> None:
        """Raises:
        ConfigError: not exactly one passive party, or BFV parameters below 128-bit
            security.
        """
        if len(passive_ids) != 1:
            raise ConfigError(f"the BFV MatMul layer takes one passive party, got {passive_ids}")
        self.channel, self.peer = channel, passive_ids[0]
        self.me = channel.party_id
        self.in_dim, self.out_dim, self.config, self.seed = in_dim, out_dim, config, seed
        self.bfv = bfv or BfvParams(plain_bits=config.output_bits + 8)
        self.ctx = BfvContext(self.bfv)
        self.batch_rows = batch_rows
        self.optimizer = (
            optimizer if isinstance(optimizer, SourceOptimizer) else SourceOptimizer(optimizer)
        )
        self._x: dict[str, Features] = {}  # features of forwards awaiting their backward
        self._masks: dict[str, np.ndarray] = {}  # R of forwards awaiting their m2
        self._ahead: tuple[str, Features] | None = None  # the next forward (`forward_ahead`)

    def setup(self, tag_prefix: str) -> None:
        """Exchange keys and parameters, send [[V_A^(0)]]_B, receive [[U_B]]_A.

        Raises:
            ConfigError: the passive party's parameters make the layer unsafe or unusable.
            PayloadError, ChannelError: bad or missing messages.
        """
        t, ctx, bfv = tag_prefix, self.ctx, self.bfv
        self.keys = shared.generate_keys(ctx, self.me)
        shared.send_blobs(self.channel, self.peer, f"{t}/pk", [self.keys.public_bytes], self.me)
        info = control_from_payload(self.channel.recv(self.peer, f"{t}/params"))
        self.params = BfvLayerParams(
            self.out_dim, self.in_dim, int(info["in_dim"]), self.config.feature_bits,
            int(info["feature_bits"]), self.config.output_bits, self.batch_rows,
            bfv.poly_degree, bfv.coeff_bits, bfv.plain_bits, bfv.stat_bits,
        )  # fmt: skip
        self.params.check()
        self.channel.send(self.peer, f"{t}/params", control_to_payload(self.params.to_fields()))
        (public,) = shared.recv_blobs(self.channel, self.peer, f"{t}/pk", self.peer, 1)
        self.peer_key = PeerKey(ctx, public)
        self.lay_a, self.lay_b = self.params.layouts()
        rng = shared.share_rng(self.seed, self.keys, "v_a")
        v_a = sample_share(rng, self.params.passive_in_dim, self.out_dim)
        bits = self.params.weight_bits(self.params.passive_feature_bits)
        polys = self.lay_a.weights(encode(v_a, bits, self.bfv.plain_bits - 1, "V_A"))
        blobs = [self.keys.encrypt(to_residues(p, bfv.plain_bits)) for p in polys]
        shared.send_blobs(self.channel, self.peer, f"{t}/v_a", blobs, self.me)
        rng = shared.share_rng(self.seed, self.keys, "v_b")
        self.v_b = sample_share(rng, self.in_dim, self.out_dim)
        self.bias = np.zeros(self.out_dim)
        u_b = shared.recv_blobs(self.channel, self.peer, f"{t}/u_b", self.peer, self.lay_b.blocks)
        self.u_b = [ctx.ciphertext(b) for b in u_b]
        self.u_b_ntt = ctx.ntt(self.u_b)  # U_B never changes: transformed once
        self.m1_flood = self.params.forward_flood(self.lay_b, self.config.feature_bits)

    def forward(self, tag: str, x: Features, rows: object = None) -> np.ndarray:
        """Z (n x h) for B's rows x; the passive party runs its forward at the same tag.

        Raises:
            InputError, EncodingError: bad features or features beyond the range.
            PayloadError, ChannelError: a bad or missing m2.
        """
        self.start_forward(tag, x)
        return self.finish_forward(tag)

    def start_forward(self, tag: str, x: Features, rows: object = None) -> None:
        """Send m1 for the rows x (`rows`: the Paillier layer's precomputed row sets, which
        this layer does not make)."""
        self._require_setup()
        if tag in self._masks:  # its m1 went out ahead (`forward_ahead`)
            return
        x = check_features(x, self.in_dim)
        n, ctx, lay = x.shape[0], self.ctx, self.lay_b
        x_int = shared.feature_ints(x, self.config.feature_bits, "active")
        masks = ctx.random_coeffs(lay.groups(n))
        products = shared.plaintexts(ctx, lay.forward_plain(x_int))
        blobs = []
        for g in range(masks.shape[0]):
            ct = ctx.dot(self.u_b_ntt, products[g * lay.blocks : (g + 1) * lay.blocks])
            ctx.sub_plain(ct, ctx.plaintext(masks[g]))
            blobs.append(ctx.flood(ct, self.peer_key, self.m1_flood))
        shared.send_blobs(self.channel, self.peer, f"{tag}/m1", blobs, self.peer)
        done = [t for t in self._x if t not in self._masks]  # Z made, no backward yet
        while len(self._x) >= MAX_PENDING and done:  # forwards without one (validation)
            del self._x[done.pop(0)]
        self._x[tag] = x
        self._masks[tag] = lay.read_output(masks, n)

    def forward_ahead(self, tag: str, x: Features) -> None:
        """Send the m1 of the forward step `tag` (rows x) during the next `backward`, right
        after its m3, while the passive party steps: m1 depends on U_B and x only, and
        A reads it by its tag when it runs that forward. `start_forward(tag, ...)` then
        sends nothing."""
        self._ahead = (tag, x)

    def finish_forward(self, tag: str) -> np.ndarray:
        """Z of the forward step `tag` whose m1 went out (`start_forward`).

        Raises:
            SecureError: no m1 went out at `tag`.
            PayloadError, ChannelError: a bad or missing m2.
        """
        masks, x = self._masks.pop(tag, None), self._x.get(tag)
        if masks is None or x is None:
            raise SecureError(f"no m1 went out at '{tag}' (call start_forward first)")
        n, ctx = x.shape[0], self.ctx
        ctx.prepare(self.peer_key, self.lay_b.groups(self.batch_rows), self.m1_flood)  # next m1's
        m2 = shared.recv_blobs(self.channel, self.peer, f"{tag}/m2", self.me, self.lay_a.groups(n))
        polys = np.stack([self.keys.decrypt(ctx.ciphertext(b, last=True)) for b in m2])
        total = self.lay_a.read_output(polys, n) + masks
        z = centered(total & np.uint64(ctx.plain_modulus - 1), self.bfv.plain_bits)
        own = np.asarray(x @ self.v_b, dtype=np.float64) + self.bias
        return np.asarray(z / float(2**self.config.output_bits) + own, dtype=np.float64)

    def backward(self, tag: str, grad_z: np.ndarray, lr: float, x: Features | None = None) -> None:
        """Send m3 = [[lr G D]]_B, step V_B and the bias, then refresh A's [[V_A]].

        Raises:
            InputError, EncodingError: bad grad_z or lr, or a step beyond its scale.
            SecureError: no forward step at `tag`.
            PayloadError, ChannelError: a bad or missing vr.
        """
        self._require_setup()
        x = self._x.pop(tag, None) if x is None else check_features(x, self.in_dim)
        if x is None:
            raise SecureError(f"no forward step at '{tag}' to take the backward of")
        check_lr(lr)
        g = check_step(grad_z, 1.0, (x.shape[0], self.out_dim))
        step = self.optimizer.passive_step(g, lr)
        bits, plain_bits = self.params.grad_bits(), self.bfv.plain_bits
        polys = self.lay_a.grad_polys(encode(step, bits, plain_bits - 1, "the step lr * G"))
        blobs = [self.keys.encrypt(to_residues(p, plain_bits)) for p in polys]
        shared.send_blobs(self.channel, self.peer, f"{tag}/m3", blobs, self.me)
        self._own_step(x, g, lr)
        if self._ahead is not None:
            self.start_forward(*self._ahead)
            self._ahead = None
        self._refresh(tag)

    def local_step(self, x: Features, grad_z: np.ndarray, lr: float) -> None:
        """Update only V_B and the bias from a (cached) derivative; nothing is sent."""
        self._require_setup()
        x = check_features(x, self.in_dim)
        check_lr(lr)
        self._own_step(x, check_step(grad_z, 1.0, (x.shape[0], self.out_dim)), lr)

    def _own_step(self, x: Features, g: np.ndarray, lr: float) -> None:
        self.v_b = self.optimizer.own_step("v_b", self.v_b, np.asarray(x.T @ g), lr)
        self.bias = self.optimizer.own_step("bias", self.bias, g.sum(axis=0), lr)

    def set_bias(self, bias: np.ndarray) -> None:
        """Start the bias b of Z at `bias` (the label prior, when the top is the identity)."""
        self.bias = np.asarray(bias, dtype=np.float64).reshape(self.out_dim).copy()

    def _refresh(self, tag: str) -> None:
        """Decrypt A's masked [[V_A + R_V]] and send it back encrypted afresh, only the
        weight support kept (the backward product's other coefficients dropped)."""
        lay, ctx = self.lay_a, self.ctx
        vr = shared.recv_blobs(self.channel, self.peer, f"{tag}/vr", self.me, lay.blocks)
        polys = np.stack([self.keys.decrypt(ctx.ciphertext(b, last=True)) for b in vr])
        kept = lay.weights_support(polys)
        shared.send_blobs(
            self.channel, self.peer, f"{tag}/vc", [self.keys.encrypt(p) for p in kept], self.me
        )

    def state_dict(self) -> dict[str, Any]:
        """Keys, parameters, shares and [[U_B]]_A as plain values (bytes, arrays), for a
        checkpoint or a model part; a resumed layer loads it instead of `setup`.

        Raises:
            SecureError: setup() has not run.
        """
        self._require_setup()
        return {
            **shared.key_state(self.keys, self.peer_key, self.params),
            "u_b": [self.ctx.to_bytes(ct) for ct in self.u_b],
            "v_b": self.v_b.copy(),
            "bias": self.bias.copy(),
            "optimizer": self.optimizer.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from `state_dict()` as the active party: nothing is sent.

        Raises:
            StateError: not a BFV layer's state, or one of other sizes or parameters.
        """
        with reading("the BFV MatMul layer's state"):
            params = shared.saved_params(state)
            if (params.active_in_dim, params.out_dim, params.bfv) != (
                self.in_dim,
                self.out_dim,
                self.bfv,
            ):
                raise StateError(f"saved for other sizes or BFV parameters: {params}")
            self.keys = KeyPair(self.ctx, bytes(state["secret"]))
            self.peer_key = PeerKey(self.ctx, bytes(state["peer_public"]))
            self.params = params
            self.lay_a, self.lay_b = params.layouts()
            self.u_b = [self.ctx.ciphertext(bytes(b)) for b in state["u_b"]]
            self.u_b_ntt = self.ctx.ntt(self.u_b)
            self.v_b = np.asarray(state["v_b"], dtype=np.float64)
            self.bias = np.asarray(state["bias"], dtype=np.float64)
            self.optimizer.load_state_dict(state["optimizer"])
            self.m1_flood = params.forward_flood(self.lay_b, self.config.feature_bits)

    def _require_setup(self) -> None:
        if not hasattr(self, "u_b"):
            raise SecureError("call setup() before forward() or backward()")

    def close(self) -> None:
        """Nothing to release (no process pool)."""
