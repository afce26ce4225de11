"""The active party (B) of the MatMul source layer: holds V_B, the bias, [[U_B^k]]_Ak.

Forward (per passive party A_k, then once):
    m1_k = [[X_B U_B^k - R_k]]_Ak  ->  A_k           (R_k: statistical mask)
    m2_k = [[X_Ak W_Ak + X_B U_B^k - R_k + M_k]]_B  <-  A_k
    Z = Dec(prod_k m2_k) + sum_k R_k + X_B V_B + b   (zero-sum masks M_k cancel)
B decrypts only the aggregate of the m2_k. Backward: m3 = [[eta G D]]_B to every A_k
(D: B's per-column step sizes, `source_layers.steps`), and V_B and b take a step of
B's optimiser on X_B^T G and sum_i G_i in plaintext.
m1 and m2 carry `rows_per_cipher` batch rows per ciphertext (`matmul.row_packing`): B
keeps [[U_B^k]] shifted by 0..k-1 rows, with the rest of its state for A_k, in a
`PassiveLink` (`matmul.link`, which makes m1); m3 keeps one row per ciphertext.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

import numpy as np
import vfl.secure.source_layers.matmul.row_shares as row_shares
from gmpy2 import mpz
from vfl.secure.channel import Channel
from vfl.secure.config import SecureConfig
from vfl.secure.errors import ConfigError, SecureError, StateError
from vfl.secure.paillier.encoding import decode, to_signed
from vfl.secure.paillier.engine import Paillier
from vfl.secure.paillier.keys import KeyPair
from vfl.secure.source_layers.checks import (
    check_features,
    check_init,
    check_lr,
    check_passive_ids,
    check_step,
    initial_share,
)
from vfl.secure.source_layers.common import (
    Features,
    InitialShares,
    Pending,
    RowRef,
    encrypt_matrix,
    exponents,
    flat,
    pack_real,
    shaped,
)
from vfl.secure.source_layers.matmul.link import PassiveLink
from vfl.secure.source_layers.matmul.setup import LayerParams, passive_info_from_payload
from vfl.secure.source_layers.role import LayerRole
from vfl.secure.source_layers.seeds import relay_pair_seeds
from vfl.secure.source_layers.sharing import private_rng
from vfl.secure.source_layers.state import (
    LayerState,
    array_from_state,
    reading,
)
from vfl.secure.source_layers.steps import SourceOptimizer
from vfl.secure.wire.ciphertexts import ciphertexts_to_payload
from vfl.secure.wire.keys import public_key_from_payload, public_key_to_payload
from vfl.secure.wire.payload import Payload

log = logging.getLogger(__name__)


@dataclass
class _InFlight:
    """A forward step between `start_forward` and `finish_forward`."""

    x: Features
    groups: int
    masks: list[list[list[int]]]  # R_k per passive party
    local: list[int]  # X_B V_B + b, packed


class ActiveSourceLayer(LayerRole[LayerParams]):
    """Party B's side of the MatMul source layer (see the module doc and docs/protocols.md §4)."""

    _params_type = LayerParams
    _saved_as = "the saved state of the active MatMul layer"

    def __init__(
        self,
        channel: Channel,
        passive_ids: list[str],
        in_dim: int,
        out_dim: int,
        config: SecureConfig,
        seed: int,
        init: InitialShares | None = None,
        *,
        keypair: KeyPair | None = None,
        optimizer: SourceOptimizer | None = None,
    ) -> None:
        """`init` (tests only): "V_B" (in_dim x out_dim), "bias" (out_dim,) and
        "V_A/<passive id>" (d_A x out_dim) initial shares. `optimizer`: the step rule of
        `backward` (default: plain SGD).

        Raises:
            ConfigError: empty or duplicate passive ids, bad dimensions.
            PaillierKeyError: no key pair given and the configured key size is too small.
        """
        ids = check_passive_ids(channel, passive_ids)
        if in_dim < 0 or out_dim < 1:
            raise ConfigError(f"need in_dim >= 0 and out_dim >= 1, got {in_dim}, {out_dim}")
        self.in_dim, self.out_dim = in_dim, out_dim
        self.params = LayerParams.for_active(config, in_dim, out_dim, ids)
        self.packer = self.params.packer()
        super().__init__(channel, config, seed, init, keypair, own_pool=True)
        self._ids = ids
        self._links: dict[str, PassiveLink] = {}
        self._v_b = np.zeros((in_dim, out_dim))
        self._bias = np.zeros(out_dim)
        self._pending: Pending[Features] = Pending("pass x explicitly")
        self.optimizer = optimizer or SourceOptimizer()
        self._in_flight: dict[str, _InFlight] = {}  # started forward steps, by tag
        self._row_masks: dict[str, dict[str, list[list[int]]]] = {}  # set -> party -> R_i

    @property
    def cols(self) -> int:
        return self.packer.columns(self.out_dim)

    def setup(self, tag_prefix: str) -> None:
        """Exchange keys and parameters with every passive party and initialise shares.

        Raises:
            PayloadError, PaillierKeyError, ChannelError: a peer sent something unusable or
                nothing at all.
        """
        own, p, timeout = self._crypto.own, tag_prefix, self.config.timeout_s
        for pid in self._ids:
            self.channel.send(pid, f"{p}/pk", public_key_to_payload(own.pk))
        peers = {pid: self._receive_peer(pid, p) for pid in self._ids}
        max_in_dim = max(in_dim for _, in_dim, _ in peers.values())
        self.params = self.params.with_row_packing(self.config.rows_per_cipher, max_in_dim)
        for pid in self._ids:
            self.channel.send(pid, f"{p}/params", self.params.to_payload())
        rng = private_rng(self.seed, self._crypto.keypair.private, "active")
        wires = {pid: self._wire_to(pid) for pid in self._ids}
        for pid, (_, in_dim, bits) in peers.items():
            v_a = initial_share(self._init, f"V_A/{pid}", in_dim, self.out_dim, rng)
            scale = self.params.weight_bits(bits)
            wires[pid].send(f"{p}/v_a", encrypt_matrix(own, self.packer, v_a, scale))
        keys = {pid: he.pk for pid, (he, _, _) in peers.items()}
        relay_pair_seeds(self.channel, p, keys, timeout)
        for pid, info in peers.items():
            self._links[pid] = PassiveLink.receive(wires[pid], p, info, self.params, self.packer)
        self._init_own_shares(rng)
        log.info("active source layer %s: setup with %d passive parties", p, len(peers))

    def _receive_peer(self, pid: str, p: str) -> tuple[Paillier, int, int]:
        """A passive party's public key context, feature count and feature scale."""
        payload = self.channel.recv(pid, f"{p}/pk", self.config.timeout_s)
        key = public_key_from_payload(payload, pid, self.config)
        info = self.channel.recv(pid, f"{p}/params", self.config.timeout_s)
        in_dim, bits = passive_info_from_payload(info, self.params, pid)
        return self._crypto.add_peer(key), in_dim, bits

    def _init_own_shares(self, rng: np.random.Generator) -> None:
        self._v_b = initial_share(self._init, "V_B", self.in_dim, self.out_dim, rng)
        bias = check_init(self._init, "bias", (self.out_dim,))
        self._bias = np.zeros(self.out_dim) if bias is None else bias

    def set_bias(self, bias: np.ndarray) -> None:
        """Replace the bias b (B's plaintext, out_dim values), e.g. with the label prior
        before training.

        Raises:
            SecureError: setup() has not run. ConfigError: not out_dim finite numbers.
        """
        self._require_setup()
        value = np.asarray(bias, dtype=np.float64)
        if value.shape != (self.out_dim,) or not np.all(np.isfinite(value)):
            raise ConfigError(f"the bias must be {self.out_dim} finite numbers")
        self._bias = value.copy()

    def forward(self, tag: str, x: Features, rows: RowRef | None = None) -> np.ndarray:
        """Run the forward exchange and return Z (N x out_dim float64).

        `rows` = (set name, row indices): x holds those rows of a set given to
        `precompute`; then no m1 is sent (the passive parties must pass the same rows).

        Raises:
            InputError, EncodingError: bad features. PayloadError, ChannelError: see `setup`.
        """
        self.start_forward(tag, x, rows)
        return self.finish_forward(tag)

    def start_forward(self, tag: str, x: Features, rows: RowRef | None = None) -> None:
        """The first half of `forward`: send m1 to every passive party (none for
        precomputed `rows`). Steps may overlap: a caller that scores batch after batch
        sends the next batch's m1 before it finishes this one, so that the passive
        parties work while B decrypts.

        Raises:
            InputError, EncodingError: bad features. ChannelError: see `setup`.
            SecureError: setup() has not run, a step `tag` is in flight already, or
                `rows` names a set that was not precomputed.
        """
        self._require_setup()
        if tag in self._in_flight:
            raise SecureError(f"forward step '{tag}' is in flight already; use a new tag")
        x = check_features(x, self.in_dim)
        layout, f_z = self.params.layout(), self.params.output_bits
        groups = layout.groups(x.shape[0])
        if rows is None:
            exps = exponents(x, self.config.feature_bits)
            matmul = self._crypto.matmul
            masks = [link.send_m1(tag, matmul, exps, groups) for link in self._links.values()]
        else:
            masks = [self._row_masks_of(rows, pid, x.shape[0]) for pid in self._links]
        local = flat(pack_real(self.packer, layout.group_values(x @ self._v_b + self._bias), f_z))
        self._in_flight[tag] = _InFlight(x, groups, masks, local)

    def finish_forward(self, tag: str) -> np.ndarray:
        """The second half of `forward`: receive the m2 of step `tag`, decrypt their sum
        and return Z (N x out_dim float64).

        Raises:
            PayloadError, ChannelError: see `setup`. SecureError: no step `tag` in flight.
        """
        step = self._in_flight.pop(tag, None)
        if step is None:
            raise SecureError(f"finish_forward('{tag}') has no step; call start_forward first")
        x, layout, f_z = step.x, self.params.layout(), self.params.output_bits
        own = self._crypto.own
        plain = own.decrypt(self._receive_m2_sum(tag, step.groups))
        mask_sum = [sum(values) for values in zip(*(flat(m) for m in step.masks), strict=True)]
        terms = zip(plain, mask_sum, step.local, strict=True)
        packed = [to_signed(a + b + c, own.pk.n) for a, b, c in terms]
        grouped = self.packer.unpack(shaped(packed, self.cols), layout.rows * self.out_dim)
        z = decode(layout.ungroup(grouped, x.shape[0]), f_z)
        self._pending.remember(tag, x)
        return z

    def _receive_m2_sum(self, tag: str, groups: int) -> list[mpz]:
        """The homomorphic sum of every passive party's m2 (flat)."""
        own, total = self._crypto.own, list[mpz]()
        shape, slots, f_z = (groups, self.cols), self.packer.slots, self.params.output_bits
        for link in self._links.values():
            m2 = link.wire.recv(f"{tag}/m2", own.pk, shape, slots, f_z)
            total = own.add(total, flat(m2.rows)) if total else flat(m2.rows)
        return total

    def precompute_pays(self, uses: int) -> bool:
        """Whether rows that go forward `uses` times are cheaper with `precompute`."""
        self._require_setup()
        return self.params.precompute_pays(uses)

    def precompute(self, tag: str, name: str, x: Features) -> None:
        """Send every passive party the m1 of all rows of set `name` (features `x`) once,
        so that later steps over them send none (`secure.source_layers.matmul.row_shares`).

        Raises:
            InputError, EncodingError: bad features. ChannelError: see `setup`.
            SecureError: setup() has not run.
        """
        self._require_setup()
        x = check_features(x, self.in_dim)
        chunks, exps = self.params.row_chunks(), exponents(x, self.config.feature_bits)
        self._row_masks[name] = {
            pid: link.send_rows(f"{tag}/{name}", self._crypto.matmul, exps, chunks)
            for pid, link in self._links.items()
        }

    def _row_masks_of(self, rows: RowRef, pid: str, n: int) -> list[list[int]]:
        """R of the rows of a precomputed set, grouped as m2 groups them."""
        table = self._row_masks.get(rows[0], {}).get(pid)
        k, row_bits = self.params.rows_per_cipher, self.params.row_chunks().row_bits
        return row_shares.grouped_rows(table, rows, n, k, row_bits)

    def rows_state(self) -> LayerState:
        """The per-row masks R_i of every precomputed set (training state, not the model)."""
        bits = self.params.row_chunks().spacing
        return {
            name: {pid: row_shares.to_state(masks, bits) for pid, masks in tables.items()}
            for name, tables in self._row_masks.items()
        }

    def load_rows_state(self, state: LayerState) -> None:
        """Raises:
        StateError: per-row masks saved for another layer or parties.
        """
        bits, what = self.params.row_chunks().spacing, "the saved per-row masks of the MatMul layer"
        with reading(what):
            self._row_masks = {
                str(name): {
                    pid: row_shares.from_state(tables[pid], bits, what) for pid in self._links
                }
                for name, tables in state.items()
            }

    def backward(self, tag: str, grad_z: np.ndarray, lr: float, x: Features | None = None) -> None:
        """Send m3 = [[lr * grad_z * D]]_B to every passive party (D: the optimiser's
        per-column step sizes) and update V_B and the bias with the optimiser.

        `x` defaults to the features of the forward step `tag` (else the latest one).

        Raises:
            InputError: grad_z of the wrong shape or non-finite, lr not positive.
            EncodingError: lr * grad_z too large for its scale.
            SecureError: no forward step to take the features from.
        """
        self._require_setup()
        x = self._pending.take(tag) if x is None else check_features(x, self.in_dim)
        check_lr(lr)
        g = check_step(grad_z, 1.0, (x.shape[0], self.out_dim))
        step = self.optimizer.passive_step(g, lr)
        sent: dict[int, Payload] = {}
        for pid, link in self._links.items():
            bits = self.params.grad_bits(link.feature_bits)
            if bits not in sent:
                matrix = encrypt_matrix(self._crypto.own, self.packer, step, bits)
                sent[bits] = ciphertexts_to_payload(matrix)
            self.channel.send(pid, f"{tag}/m3", sent[bits])
        self._own_step(x, g, lr)

    def local_step(self, x: Features, grad_z: np.ndarray, lr: float) -> None:
        """Update only B's own plaintext share V_B and the bias from a (cached) derivative.

        Used by CELU local updates at B; nothing is sent. The new arrays replace the old
        ones, so a concurrent forward sees either the old or the new share, never a mix.

        Raises:
            InputError: bad features, grad_z of the wrong shape or non-finite, lr not positive.
        """
        self._require_setup()
        x = check_features(x, self.in_dim)
        check_lr(lr)
        self._own_step(x, check_step(grad_z, 1.0, (x.shape[0], self.out_dim)), lr)

    def _own_step(self, x: Features, g: np.ndarray, lr: float) -> None:
        """V_B and b after one step of the optimiser on their full gradients (W_B = V_B +
        sum_k U_B^k with fixed U_B^k); new arrays replace the old ones."""
        opt = self.optimizer
        self._v_b = opt.own_step("v_b", self._v_b, np.asarray(x.T @ g), lr)
        self._bias = opt.own_step("bias", self._bias, g.sum(axis=0), lr)

    def _saved(self) -> tuple[LayerParams, LayerState]:
        """B's shares V_B and b, its optimiser, and per passive party its public key,
        feature count and scale, and [[U_B^k]].

        Raises:
            SecureError: setup() has not run.
        """
        self._require_setup()
        links = {pid: link.state_dict() for pid, link in self._links.items()}
        return self.params, {
            "v_b": self._v_b.copy(),
            "bias": self._bias.copy(),
            "optimizer": self.optimizer.state_dict(),
            "links": links,
        }

    def _started(self) -> bool:
        return bool(self._links)

    def _load_saved(self, params: LayerParams, state: LayerState) -> None:
        what = self._saved_as
        with reading(what):
            params.packer_checked()
            if replace(self.params, rows_per_cipher=params.rows_per_cipher) != params:
                raise StateError(f"{what} is of another layer or configuration: {params}")
            self.params = params
            self._v_b = array_from_state(state["v_b"], (self.in_dim, self.out_dim), what)
            self._bias = array_from_state(state["bias"], (self.out_dim,), what)
            if state.get("optimizer") is not None:  # None: saved before optimisers
                self.optimizer.load_state_dict(state["optimizer"])
            saved = state["links"]
            links = {
                pid: PassiveLink.restore(self._wire_to(pid), saved[pid], params, what)
                for pid in self._ids
            }
        self._links = links

    def _require_setup(self) -> None:
        """Raises:
        SecureError: setup() (or load_state_dict()) has not run.
        """
        if len(self._links) != len(self._ids):
            raise SecureError("call setup() before forward() or backward()")
