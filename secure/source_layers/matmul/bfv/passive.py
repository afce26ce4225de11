"""A passive party (A) of the BFV MatMul source layer: holds U_A, U_B (sent encrypted
under its own key at setup) and [[V_A]]_B; the messages are listed in `active`."""

from __future__ import annotations

from typing import Any

import numpy as np
import vfl.secure.source_layers.matmul.bfv.common as shared
from vfl.secure.channel import Channel
from vfl.secure.config import SecureConfig
from vfl.secure.errors import ConfigError, PayloadError, SecureError, StateError
from vfl.secure.lattice.bfv import BfvContext, KeyPair, PeerKey, encode, to_residues
from vfl.secure.lattice.params import BfvParams
from vfl.secure.source_layers.checks import check_features, check_lr
from vfl.secure.source_layers.common import Features
from vfl.secure.source_layers.matmul.bfv.setup import STEP_FACTOR_BITS, BfvLayerParams
from vfl.secure.source_layers.role import DecryptHook
from vfl.secure.source_layers.sharing import sample_share
from vfl.secure.source_layers.state import reading
from vfl.secure.source_layers.steps import scaled_columns
from vfl.secure.wire.payload import control_from_payload, control_to_payload


class PassiveBfvLayer(shared.NoRowSets):
    """A's side of the layer. `step_factors` (c_j, `steps.feature_step_factors`, capped
    at 2^8) scale A's features in the backward product, as in the Paillier layer."""

    def __init__(
        self,
        channel: Channel,
        active_id: str,
        in_dim: int,
        out_dim: int,
        config: SecureConfig,
        seed: int,
        bfv: BfvParams | None = None,
        step_factors: np.ndarray | None = None,
    ) -> None:
        self.channel, self.peer, self.me = channel, active_id, channel.party_id
        self.in_dim, self.out_dim, self.config, self.seed = in_dim, out_dim, config, seed
        self.bfv = bfv or BfvParams(plain_bits=config.output_bits + 8)
        self.ctx = BfvContext(self.bfv)
        self.step_factors: np.ndarray | None = step_factors
        # `vfl attack`: sees what this party decrypts (its shares S of m1); None: nothing does
        self.on_decrypt: DecryptHook | None = None
        self._x: dict[str, Features] = {}

    def setup(self, tag_prefix: str) -> None:
        """Exchange keys and parameters, send [[U_B]]_A, receive [[V_A^(0)]]_B.

        Raises:
            PayloadError: the active party's parameters differ from this party's.
            ChannelError: missing messages.
        """
        t, ctx = tag_prefix, self.ctx
        self.keys = shared.generate_keys(ctx, self.me)
        shared.send_blobs(self.channel, self.peer, f"{t}/pk", [self.keys.public_bytes], self.me)
        fields = {"in_dim": self.in_dim, "feature_bits": self.config.feature_bits}
        self.channel.send(self.peer, f"{t}/params", control_to_payload(fields))
        (public,) = shared.recv_blobs(self.channel, self.peer, f"{t}/pk", self.peer, 1)
        self.peer_key = PeerKey(ctx, public)
        params = BfvLayerParams.from_fields(
            control_from_payload(self.channel.recv(self.peer, f"{t}/params"))
        )
        self._check(params)
        self.params = params
        self.lay_a, self.lay_b = params.layouts()
        rng = shared.share_rng(self.seed, self.keys, "u")
        self.u_a = sample_share(rng, self.in_dim, self.out_dim)
        u_b = sample_share(rng, params.active_in_dim, self.out_dim)
        limit = self.bfv.plain_bits - 1
        self.u_a_int = encode(self.u_a, params.weight_bits(self.config.feature_bits), limit, "U_A")
        u_b_int = encode(u_b, params.weight_bits(params.active_feature_bits), limit, "U_B")
        blobs = [
            self.keys.encrypt(to_residues(p, self.bfv.plain_bits))
            for p in self.lay_b.weights(u_b_int)
        ]
        shared.send_blobs(self.channel, self.peer, f"{t}/u_b", blobs, self.me)
        v_a = shared.recv_blobs(self.channel, self.peer, f"{t}/v_a", self.peer, self.lay_a.blocks)
        self.v_a = [ctx.ciphertext(b) for b in v_a]
        self.m2_flood = params.forward_flood(self.lay_a, self.config.feature_bits)

    def _check(self, params: BfvLayerParams) -> None:
        mine = (self.in_dim, self.out_dim, self.config.feature_bits, self.config.output_bits)
        theirs = (
            params.passive_in_dim,
            params.out_dim,
            params.passive_feature_bits,
            params.output_bits,
        )
        if mine != theirs or params.bfv != self.bfv:
            raise PayloadError(
                f"the active party's BFV layer parameters {params} do not match this party's "
                f"(in_dim, out_dim, feature_bits, output_bits) = {mine} and {self.bfv}; set the "
                "same crypto.bfv and model settings at both parties"
            )
        params.check()

    def forward(self, tag: str, x: Features, rows: object = None) -> None:
        """Answer B's m1 for the rows x with m2.

        Raises:
            InputError, EncodingError: bad features or features beyond the range.
            PayloadError, ChannelError: a bad or missing m1.
        """
        self._require_setup()
        x = check_features(x, self.in_dim)
        n, ctx, lay, plain_bits = x.shape[0], self.ctx, self.lay_a, self.bfv.plain_bits
        x_int = shared.feature_ints(x, self.config.feature_bits, "passive")
        products = shared.plaintexts(ctx, lay.forward_plain(x_int))
        groups = lay.groups(n)
        # X_A [[V_A]] and the blinders do not depend on m1: made while m1 is in flight
        ctx.prepare(self.peer_key, groups, self.m2_flood)
        v_a = ctx.ntt(self.v_a)  # once per step, for every group's product
        cts = [ctx.dot(v_a, products[g * lay.blocks : (g + 1) * lay.blocks]) for g in range(groups)]
        m1 = shared.recv_blobs(self.channel, self.peer, f"{tag}/m1", self.me, self.lay_b.groups(n))
        polys = np.stack([self.keys.decrypt(ctx.ciphertext(b, last=True)) for b in m1])
        s_share = self.lay_b.read_output(polys, n)  # S: uniform mod t (B's masks R)
        if self.on_decrypt is not None:
            self.on_decrypt(f"{tag}/m1", s_share.tolist())
        share = s_share + to_residues(x_int @ self.u_a_int, plain_bits)
        fill = lay.place_output(share & np.uint64(ctx.plain_modulus - 1), ctx.random_coeffs(groups))
        blobs = []
        for g, ct in enumerate(cts):
            ctx.add_plain(ct, ctx.plaintext(fill[g]))
            blobs.append(ctx.flood(ct, self.peer_key, self.m2_flood))
        shared.send_blobs(self.channel, self.peer, f"{tag}/m2", blobs, self.peer)
        self._x = {tag: x}

    def backward(self, tag: str, lr: float, x: Features | None = None) -> None:
        """Apply m3: [[V_A]] -= (X_A C)^T [[lr G D]], then refresh [[V_A]] through B.

        Raises:
            InputError: bad lr. SecureError: no forward step at `tag`.
            PayloadError, ChannelError: a bad or missing m3 or vc.
        """
        self._require_setup()
        x = self._x.pop(tag, None) if x is None else check_features(x, self.in_dim)
        if x is None:
            raise SecureError(f"no forward step at '{tag}' to take the backward of")
        check_lr(lr)
        ctx, lay, bits = self.ctx, self.lay_a, self.config.feature_bits
        n = x.shape[0]
        factors = (
            None
            if self.step_factors is None
            else np.minimum(self.step_factors, 2.0**STEP_FACTOR_BITS)
        )
        x_int = shared.feature_ints(
            scaled_columns(x, factors, bits), bits, "passive", STEP_FACTOR_BITS
        )
        flood = self.params.refresh_flood(lay, n)
        ctx.prepare(self.peer_key, lay.blocks, flood)  # for vr, while B makes m3
        m3 = shared.recv_blobs(self.channel, self.peer, f"{tag}/m3", self.peer, lay.row_blocks(n))
        grads = ctx.ntt([ctx.ciphertext(b) for b in m3])  # each a factor of every block
        products = shared.plaintexts(ctx, lay.backward_plain(x_int))  # (row block, block)
        for b in range(lay.blocks):
            delta = ctx.dot(grads, products[b :: lay.blocks])
            ctx.sub(self.v_a[b], delta)
        self._refresh(tag, flood)

    def _refresh(self, tag: str, flood: int) -> None:
        """Send [[V_A + R_V]]_B (flooded) and take B's fresh encryption of it back."""
        ctx, lay = self.ctx, self.lay_a
        masks = ctx.random_coeffs(lay.blocks)
        blobs = []
        for b, ct in enumerate(self.v_a):
            ctx.add_plain(ct, ctx.plaintext(masks[b]))
            blobs.append(ctx.flood(ct, self.peer_key, flood))
        shared.send_blobs(self.channel, self.peer, f"{tag}/vr", blobs, self.peer)
        rows = self.params.batch_rows
        ctx.prepare(self.peer_key, lay.groups(rows), self.m2_flood)  # the next m2's, meanwhile
        vc = shared.recv_blobs(self.channel, self.peer, f"{tag}/vc", self.peer, lay.blocks)
        kept = lay.weights_support(masks)
        fresh = []
        for b, blob in enumerate(vc):
            ct = ctx.ciphertext(blob)
            ctx.sub_plain(ct, ctx.plaintext(kept[b]))
            fresh.append(ct)
        self.v_a = fresh

    def own_share(self) -> np.ndarray:
        """U_A, this party's plaintext share of W_A."""
        return self.u_a

    def backward_cached(self, m3: object, x: Features, lr: float) -> None:
        """Raises:
        ConfigError: always: a step replayed without B cannot refresh [[V_A]].
        """
        raise ConfigError("the BFV MatMul layer takes no local updates (local_updates.mode: none)")

    def state_dict(self) -> dict[str, Any]:
        """Keys, parameters, U_A and [[V_A]]_B as plain values (see the active layer's).

        Raises:
            SecureError: setup() has not run.
        """
        self._require_setup()
        return {
            **shared.key_state(self.keys, self.peer_key, self.params),
            "u_a": self.u_a.copy(),
            "v_a": [self.ctx.to_bytes(ct) for ct in self.v_a],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from `state_dict()` as the passive party: nothing is sent.

        Raises:
            StateError: not a BFV layer's state, or one of other sizes or parameters.
        """
        with reading("the BFV MatMul layer's state"):
            params = shared.saved_params(state)
            try:
                self._check(params)
            except PayloadError as exc:
                raise StateError(str(exc)) from exc
            self.keys = KeyPair(self.ctx, bytes(state["secret"]))
            self.peer_key = PeerKey(self.ctx, bytes(state["peer_public"]))
            self.params = params
            self.lay_a, self.lay_b = params.layouts()
            self.u_a = np.asarray(state["u_a"], dtype=np.float64)
            limit = self.bfv.plain_bits - 1
            bits = params.weight_bits(self.config.feature_bits)
            self.u_a_int = encode(self.u_a, bits, limit, "U_A")
            self.v_a = [self.ctx.ciphertext(bytes(b)) for b in state["v_a"]]
            self.m2_flood = params.forward_flood(self.lay_a, self.config.feature_bits)

    def _require_setup(self) -> None:
        if not hasattr(self, "v_a"):
            raise SecureError("call setup() before forward() or backward()")

    def close(self) -> None:
        """Nothing to release (no process pool)."""
