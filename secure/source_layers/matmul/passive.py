"""A passive party (A_k) of the MatMul source layer: holds U_A, U_B^k and [[V_A]]_B.

Forward: compute [[X_A V_A]]_B (cost O(nnz(X_A)), before m1 arrives), decrypt m1 to
S = X_B U_B^k - R_k, add the plaintexts X_A U_A + S (+ the zero-sum mask M_k when
K >= 2), re-randomise, send m2. Backward: receive m3 = [[eta G D]]_B and update only
the rows of [[V_A]]_B whose features occur in the batch: [[V_A]] -= (X_A C)^T [[eta G D]]
(C: this party's own per-feature step factors, `source_layers.steps`; D: B's).
With row packing (`matmul.row_packing`) m1 and m2 carry k rows per ciphertext; A either
keeps [[V_A]] shifted by 0..k-1 rows (few features) or folds each group's rows of
[[X_A V_A]] by Horner's rule (many features).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import vfl.secure.source_layers.matmul.row_shares as row_shares
from vfl.secure.channel import Channel
from vfl.secure.config import SecureConfig
from vfl.secure.errors import ConfigError, PayloadError, SecureError
from vfl.secure.paillier.cipher_matrix import CipherMatrix
from vfl.secure.paillier.encoding import Packer
from vfl.secure.paillier.engine import Paillier
from vfl.secure.paillier.keys import KeyPair
from vfl.secure.source_layers.checks import (
    check_active_key_bits,
    check_features,
    check_lr,
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
from vfl.secure.source_layers.matmul.row_packing import HornerRows, ShiftedCopies, packed_products
from vfl.secure.source_layers.matmul.setup import LayerParams, passive_info_payload
from vfl.secure.source_layers.role import LayerRole
from vfl.secure.source_layers.seeds import agree_pair_seeds
from vfl.secure.source_layers.sharing import ZeroSumMasks, private_rng
from vfl.secure.source_layers.state import (
    LayerState,
    array_from_state,
    cipher_from_state,
    cipher_state,
    modulus_state,
    public_key_from_state,
    reading,
)
from vfl.secure.source_layers.steps import scaled_columns
from vfl.secure.wire.ciphertexts import ciphertexts_from_payload
from vfl.secure.wire.keys import public_key_from_payload, public_key_to_payload
from vfl.secure.wire.payload import Payload

log = logging.getLogger(__name__)


@dataclass
class _State:
    """Everything a passive party knows after setup."""

    params: LayerParams
    packer: Packer
    he_b: Paillier  # B's public key, with obfuscators for re-randomising m2
    u_a: np.ndarray  # U_A, plaintext
    u_b: np.ndarray  # U_B^k, plaintext (B holds it encrypted under our key)
    v_a: CipherMatrix  # [[V_A]]_B, one row of packed ciphertexts per feature
    v_a_packed: ShiftedCopies | HornerRows  # packs X_A [[V_A]] k rows a ciphertext
    masks: ZeroSumMasks

    @property
    def cols(self) -> int:
        return self.packer.columns(self.params.out_dim)


class PassiveSourceLayer(LayerRole[LayerParams]):
    """Party A_k's side of the MatMul source layer (see the module doc and docs/protocols.md §4)."""

    _params_type = LayerParams
    _saved_as = "the saved state of a passive MatMul layer"

    def __init__(
        self,
        channel: Channel,
        active_id: str,
        in_dim: int,
        out_dim: int,
        config: SecureConfig,
        seed: int,
        init: InitialShares | None = None,
        *,
        keypair: KeyPair | None = None,
        step_factors: np.ndarray | None = None,
    ) -> None:
        """`init` (tests only): "U_A" (in_dim x out_dim) and "U_B" (d_B x out_dim).
        `step_factors`: c_j per feature, multiplied into column j of X_A before the
        update's fixed-point encoding (`steps.feature_step_factors`; None: all 1).

        Raises:
            ConfigError: bad dimensions or step factors.
            PaillierKeyError: no key pair given and the configured key size is too small.
        """
        if in_dim < 1 or out_dim < 1:
            raise ConfigError(f"need in_dim >= 1 and out_dim >= 1, got {in_dim}, {out_dim}")
        if step_factors is not None:
            step_factors = np.asarray(step_factors, dtype=np.float64)
            if step_factors.shape != (in_dim,) or not np.all(
                np.isfinite(step_factors) & (step_factors > 0)
            ):
                raise ConfigError(f"step_factors must be {in_dim} positive finite numbers")
        super().__init__(channel, config, seed, init, keypair, own_pool=False)
        self.active_id, self.in_dim, self.out_dim = active_id, in_dim, out_dim
        self.step_factors = step_factors
        self._state: _State | None = None
        self._pending: Pending[Features] = Pending("pass x explicitly")
        self._row_shares: dict[str, list[list[int]]] = {}  # set -> S_i per row
        self._wire = self._wire_to(active_id)

    def setup(self, tag_prefix: str) -> None:
        """Exchange keys and parameters with the active party and initialise shares.

        Raises:
            PayloadError, PaillierKeyError, ChannelError: the active party sent something
                unusable (mismatched out_dim or key size, bad key) or nothing at all.
        """
        b, p, timeout, own = self.active_id, tag_prefix, self.config.timeout_s, self._crypto.own
        self.channel.send(b, f"{p}/pk", public_key_to_payload(own.pk))
        info = passive_info_payload(self.in_dim, self.config.feature_bits, self.config.key_bits)
        self.channel.send(b, f"{p}/params", info)
        key_b = public_key_from_payload(self.channel.recv(b, f"{p}/pk", timeout), b, self.config)
        params = LayerParams.from_payload(self.channel.recv(b, f"{p}/params", timeout))
        self._check_params(params)
        packer, he_b = params.packer_checked(), self._crypto.add_peer(key_b)
        rng = private_rng(self.seed, self._crypto.keypair.private, "passive")
        u_a = initial_share(self._init, "U_A", self.in_dim, self.out_dim, rng)
        u_b = initial_share(self._init, "U_B", params.active_in_dim, self.out_dim, rng)
        enc_u_b = encrypt_matrix(own, packer, u_b, params.weight_bits(params.active_feature_bits))
        self._wire.send(f"{p}/u_b", enc_u_b)
        shape = (self.in_dim, packer.columns(self.out_dim))
        scale = params.weight_bits(self.config.feature_bits)
        v_a = self._wire.recv(f"{p}/v_a", key_b, shape, packer.slots, scale, refill=False)
        packed = packed_products(
            v_a.rows, params.layout(), self.in_dim, key_b.nsquare, he_b.threads
        )
        ids = params.passive_ids
        masks = ZeroSumMasks(agree_pair_seeds(self.channel, b, p, ids, own, self.config))
        self._state = _State(params, packer, he_b, u_a, u_b, v_a, packed, masks)
        log.info("passive source layer %s: setup done", p)

    def _saved(self) -> tuple[LayerParams, LayerState]:
        """B's public key, U_A, U_B^k, [[V_A]]_B and the zero-sum masks' seeds and counter.

        Raises:
            SecureError: setup() has not run.
        """
        st = self._require_setup()
        return st.params, {
            "active_key": modulus_state(st.he_b.pk),
            "u_a": st.u_a.copy(),
            "u_b": st.u_b.copy(),
            "v_a": cipher_state(st.v_a.rows, st.he_b.pk),
            "masks": st.masks.state_dict(),
        }

    def _started(self) -> bool:
        return self._state is not None

    def _load_saved(self, params: LayerParams, state: LayerState) -> None:
        what = self._saved_as
        with reading(what):
            self._check_params(params)
            packer = params.packer_checked()
            key_b = public_key_from_state(state["active_key"], self.active_id, self.config)
            cols = packer.columns(self.out_dim)
            rows = cipher_from_state(state["v_a"], key_b, (self.in_dim, cols), f"{what}: [[V_A]]")
            u_a = array_from_state(state["u_a"], (self.in_dim, self.out_dim), f"{what}: U_A")
            u_b = array_from_state(state["u_b"], (params.active_in_dim, self.out_dim), what)
            masks = ZeroSumMasks.from_state(state["masks"])
        he_b = self._crypto.add_peer(key_b)
        scale = params.weight_bits(self.config.feature_bits)
        v_a = CipherMatrix(rows, cols, key_b, packer.slots, scale)
        packed = packed_products(rows, params.layout(), self.in_dim, key_b.nsquare, he_b.threads)
        self._state = _State(params, packer, he_b, u_a, u_b, v_a, packed, masks)

    def _check_params(self, params: LayerParams) -> None:
        """Raises:
        PayloadError: the active party's layer has another width, does not name this
            party, uses another key size, or leaves no room for this party's [[eta G]].
        """
        me = self.channel.party_id
        if params.out_dim != self.out_dim or me not in params.passive_ids:
            raise PayloadError(
                f"the active party runs a layer of width {params.out_dim} with passive parties "
                f"{list(params.passive_ids)}; this party ('{me}') expects width {self.out_dim}"
            )
        check_active_key_bits(params.key_bits, self.config)
        params.grad_bits(self.config.feature_bits)

    def forward(self, tag: str, x: Features, rows: RowRef | None = None) -> None:
        """Answer the active party's m1 with m2 for this batch.

        `rows` = (set name, row indices): x holds those rows of a set received by
        `precompute`; then the active party sends no m1 and their S_i are used.

        Raises:
            InputError, EncodingError: bad features. PayloadError, ChannelError: bad or missing m1.
            SecureError: setup() has not run.
        """
        st = self._require_setup()
        x = check_features(x, self.in_dim)
        cols, he_b, f_z, layout = st.cols, st.he_b, st.params.output_bits, st.params.layout()
        groups = layout.groups(x.shape[0])
        xv = st.v_a_packed.product(
            self._crypto.matmul, exponents(x, self.config.feature_bits), cols
        )
        xu = flat(pack_real(st.packer, layout.group_values(x @ st.u_a), f_z))
        s_masked = self._m1(st, tag, groups) if rows is None else self._shares_of(st, rows, x)
        plain = [a + b for a, b in zip(xu, s_masked, strict=True)]
        if st.masks.active:
            zero_sum = flat(st.masks.next_masks(tag, groups, cols, int(he_b.pk.n)))
            plain = [a + m for a, m in zip(plain, zero_sum, strict=True)]
        m2 = he_b.rerandomize(he_b.add_plain(flat(xv), plain))
        matrix = CipherMatrix(shaped(m2, cols), cols, he_b.pk, st.packer.slots, f_z)
        self._wire.send(f"{tag}/m2", matrix)
        self._pending.remember(tag, x)

    def _m1(self, st: _State, tag: str, groups: int) -> list[int]:
        """S = Dec(m1) of this step (flat)."""
        own = self._crypto.own
        shape, slots = (groups, st.cols), st.packer.slots
        m1 = self._wire.recv(f"{tag}/m1", own.pk, shape, slots, st.params.output_bits)
        plain = own.decrypt(flat(m1.rows))
        if self.on_decrypt is not None:
            self._decrypted(f"{tag}/m1", shaped(plain, st.cols))
        return plain

    def _shares_of(self, st: _State, rows: RowRef, x: Features) -> list[int]:
        """The S_i of a precomputed set's rows, grouped as m2 groups them (flat)."""
        table = self._row_shares.get(rows[0])
        k, row_bits = st.params.rows_per_cipher, st.params.row_chunks().row_bits
        return flat(row_shares.grouped_rows(table, rows, x.shape[0], k, row_bits))

    def precompute_pays(self, uses: int) -> bool:
        """Whether rows that go forward `uses` times are cheaper with `precompute`."""
        st = self._require_setup()
        return st.params.precompute_pays(uses)

    def precompute(self, tag: str, name: str, n: int) -> None:
        """Receive the m1 of all `n` rows of set `name` from the active party (its
        `precompute`), decrypt it and keep each row's S_i.

        Raises:
            PayloadError, ChannelError: bad or missing setup m1.
            SecureError: setup() has not run.
        """
        st = self._require_setup()
        chunks, own, cols = st.params.row_chunks(), self._crypto.own, st.cols
        slots, f_z = st.packer.slots, st.params.output_bits
        groups = -(-n // chunks.rows_per_cipher)
        plain: list[list[int]] = []
        for part, start in enumerate(range(0, groups, row_shares.CHUNK_CIPHERTEXTS)):
            count = min(row_shares.CHUNK_CIPHERTEXTS, groups - start)
            m1 = self._wire.recv(f"{tag}/{name}/s{part}", own.pk, (count, cols), slots, f_z)
            plain.extend(shaped(own.decrypt(flat(m1.rows)), cols))
        self._row_shares[name] = chunks.split(plain, n)
        self._decrypted(f"{tag}/{name}", self._row_shares[name])

    def own_share(self) -> np.ndarray:
        """U_A, this party's plaintext share of its weights (fixed since setup).

        Raises:
            SecureError: setup() has not run.
        """
        return self._require_setup().u_a.copy()

    def rows_state(self) -> LayerState:
        """The S_i of every precomputed set (training state, not the model)."""
        st = self._require_setup()
        bits = st.params.row_chunks().spacing
        return {name: row_shares.to_state(s, bits) for name, s in self._row_shares.items()}

    def load_rows_state(self, state: LayerState) -> None:
        """Raises:
        StateError: per-row shares saved for another layer.
        """
        st = self._require_setup()
        bits, what = st.params.row_chunks().spacing, "the saved per-row shares of a MatMul layer"
        with reading(what):
            self._row_shares = {
                str(name): row_shares.from_state(saved, bits, what) for name, saved in state.items()
            }

    def backward(self, tag: str, lr: float, x: Features | None = None) -> CipherMatrix:
        """Receive m3 = [[eta G D]]_B, apply it, and return it (e.g. for a CELU cache).

        The active party folds its learning rate into m3, so the step applied is exactly
        (X_A C)^T m3 (C: `step_factors`); `lr` is checked (positive, finite) but does not
        rescale it. `x` defaults to the features of the forward step `tag` (else the
        latest one).

        Raises:
            InputError: bad features or lr.
            PayloadError, ChannelError: bad or missing m3.
            SecureError: setup() has not run, or no forward step to take x from.
        """
        st = self._require_setup()
        x = self._pending.take(tag) if x is None else check_features(x, self.in_dim)
        check_lr(lr)
        shape, slots = (x.shape[0], st.cols), st.packer.slots
        m3 = self._wire.recv(f"{tag}/m3", st.he_b.pk, shape, slots, self._grad_bits(st))
        self._apply(st, m3, x)
        return m3

    def backward_cached(self, m3: CipherMatrix | Payload, x: Features, lr: float) -> None:
        """Re-apply a stored [[eta G]]_B to the batch `x` (CELU local update, weight 1).

        Raises:
            PayloadError: m3 is not an [[eta G]] of this layer for len(x) rows.
            InputError, EncodingError: bad features or lr. SecureError: setup() has not run.
        """
        st = self._require_setup()
        x = check_features(x, self.in_dim)
        check_lr(lr)
        shape, bits = (x.shape[0], st.cols), self._grad_bits(st)
        if isinstance(m3, Payload):
            m3 = ciphertexts_from_payload(
                m3, st.he_b.pk, shape=shape, slots=st.packer.slots, scale_bits=bits
            )
        if m3.shape != shape or m3.scale_bits != bits or m3.key.n != st.he_b.pk.n:
            raise PayloadError(
                f"cached step has shape {m3.shape} at 2^{m3.scale_bits} under the key of "
                f"'{m3.key_owner}'; expected {shape} at 2^{bits} under '{self.active_id}'"
            )
        self._apply(st, m3, x)

    def _grad_bits(self, st: _State) -> int:
        return st.params.grad_bits(self.config.feature_bits)

    def _apply(self, st: _State, m3: CipherMatrix, x: Features) -> None:
        """[[V_A]] -= (X_A C)^T [[eta G D]], touching only rows of features present in x."""
        bits = self.config.feature_bits
        xt = exponents(scaled_columns(x, self.step_factors, bits), bits).T.tocsr()
        present = np.flatnonzero(np.diff(xt.indptr))
        if not present.size:
            return
        delta = self._crypto.matmul.matmul(-xt[present], m3.rows, st.he_b.pk.nsquare, st.cols)
        st.v_a_packed.add(present.tolist(), delta)

    def _require_setup(self) -> _State:
        """This party's state after setup.

        Raises:
            SecureError: setup() (or load_state_dict()) has not run.
        """
        if self._state is None:
            raise SecureError("call setup() before forward() or backward()")
        return self._state
