"""A passive party (A_k) of the Embed-MatMul layer: holds its categorical codes, Q^A (fixed),
[[Q^B]]_B (every table's updated share) and [[W]]_B.

Forward: look up E^A = Q^A[x] and [[E^B]] = [[Q^B]][x] (only A knows x), send
e = [[E^B - R]]_B; compute [[E'_A W]]_B with E'_A = E^A + R while B answers with
c = [[E'_B W - M]]_A; decrypt c, add it (and the zero-sum mask when K >= 2), send z.
Backward: [[-dW]]_B = -E'_A^T [[lr G]]_B + [[-E'_B^T lr G]]_B updates [[W]]_B and reaches
B as y = [[-dW - Phi]]_B with [[Phi]]_A (both layouts); [[Q^B]] rows looked up in the
batch get -round(P / 2^trunc) + [[-round(S / 2^trunc)]]_B, where P = dE - S was decrypted.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
from gmpy2 import mpz
from vfl.secure.channel import Channel
from vfl.secure.config import SecureConfig
from vfl.secure.errors import ConfigError, PayloadError, SecureError, StateError
from vfl.secure.paillier.encoding import encode
from vfl.secure.paillier.engine import Paillier
from vfl.secure.paillier.keys import KeyPair, PublicKey
from vfl.secure.source_layers.checks import check_active_key_bits, check_lr, initial_share
from vfl.secure.source_layers.common import InitialShares, Pending, Wire
from vfl.secure.source_layers.embed.common import (
    add_plain_rows,
    add_rows,
    check_codes,
    decrypt_rows,
    encode_table,
    encrypt_rows,
    initial_tables,
    negated,
    sealed,
)
from vfl.secure.source_layers.embed.packing import SlotLayout, round_shift, uniform_matrix
from vfl.secure.source_layers.embed.setup import (
    EmbedParams,
    check_vocab,
    vocab_from_payload,
    vocab_payload,
)
from vfl.secure.source_layers.embed.tables import EncryptedTables, segment_rows
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
from vfl.secure.wire.keys import public_key_from_payload, public_key_to_payload

log = logging.getLogger(__name__)


@dataclass
class _State:
    """Everything a passive party holds after setup."""

    params: EmbedParams
    he_b: Paillier  # B's public key
    wire: Wire  # to and from the active party
    h_lay: SlotLayout
    d_lay: SlotLayout
    q_a: list[np.ndarray]  # Q^A per field, int64 at f_E, fixed
    q_b: EncryptedTables  # [[Q^B]]_B, absorbs every update
    w_b: list[list[mpz]]  # [[W]]_B, F*k rows x h-layout columns
    masks: ZeroSumMasks


class PassiveEmbedLayer(LayerRole[EmbedParams]):
    """Party A_k's side of the Embed-MatMul layer (see `secure.source_layers.embed`)."""

    _params_type = EmbedParams
    _saved_as = "the saved state of a passive Embed-MatMul layer"

    def __init__(
        self,
        channel: Channel,
        active_id: str,
        vocab_sizes: list[int],
        emb_dim: int,
        out_dim: int,
        config: SecureConfig,
        seed: int,
        init: InitialShares | None = None,
        *,
        keypair: KeyPair | None = None,
    ) -> None:
        """`init` (tests only): "Q_A" (one V_f x emb_dim table per field), "W_A" (F*k x h).

        Raises:
            ConfigError: no fields, a vocabulary size < 1, emb_dim or out_dim < 1.
            PaillierKeyError: no key pair given and the configured key size is too small.
        """
        if emb_dim < 1 or out_dim < 1:
            raise ConfigError(f"need emb_dim >= 1 and out_dim >= 1, got {emb_dim}, {out_dim}")
        self.vocab_sizes = check_vocab(vocab_sizes, emb_dim)
        self.active_id, self.emb_dim, self.out_dim = active_id, emb_dim, out_dim
        self.in_dim = len(self.vocab_sizes) * emb_dim
        super().__init__(channel, config, seed, init, keypair, own_pool=True)
        self._state: _State | None = None
        # per forward step: the codes and this party's masked embeddings E'_A
        self._pending: Pending[tuple[np.ndarray, np.ndarray]] = Pending("run forward() first")

    def setup(self, tag_prefix: str) -> None:
        """Exchange keys and parameters with the active party and initialise the shares.

        Raises:
            PayloadError, PaillierKeyError, ChannelError: the active party sent something
                unusable (other sizes, key size or fields) or nothing at all.
            InputError, EncodingError: an initial share is malformed or too large.
        """
        b, p, timeout, own = self.active_id, tag_prefix, self.config.timeout_s, self._crypto.own
        key_b = public_key_from_payload(self.channel.recv(b, f"{p}/pk", timeout), b, self.config)
        params = EmbedParams.from_payload(self.channel.recv(b, f"{p}/params", timeout))
        expected, _ = vocab_from_payload(self.channel.recv(b, f"{p}/vocab", timeout), b)
        self._check_params(params, expected)
        self.channel.send(b, f"{p}/pk", public_key_to_payload(own.pk))
        self.channel.send(b, f"{p}/params", vocab_payload(self.vocab_sizes, self.config.key_bits))
        wire, fields = self._wire_to(b), len(self.vocab_sizes)
        h_lay, d_lay, f_w = params.h_layout(), params.d_layout(fields), params.weight_bits
        q_a, w_a = self._own_shares(params)
        wire.send(f"{p}/w_a", encrypt_rows(own, h_lay.pack(w_a), h_lay.slots, f_w))
        wire.send(f"{p}/wt_a", encrypt_rows(own, d_lay.pack(w_a.T), d_lay.slots, f_w))
        w_b = wire.recv(f"{p}/w_b", key_b, (self.in_dim, h_lay.cols), h_lay.slots, f_w)
        q_b = self._recv_tables(wire, p, key_b, params)
        seeds = agree_pair_seeds(self.channel, b, p, params.passive_ids, own, self.config)
        he_b = self._crypto.add_peer(key_b)
        w_rows = add_plain_rows(he_b, w_b.rows, h_lay.pack(w_a))
        masks = ZeroSumMasks(seeds)
        self._state = _State(params, he_b, wire, h_lay, d_lay, q_a, q_b, w_rows, masks)
        log.info("passive embed layer %s: setup done", p)

    def _saved(self) -> tuple[EmbedParams, LayerState]:
        """B's public key, Q^A, [[Q^B]]_B, [[W]]_B and the zero-sum masks' seeds and
        counter.

        Raises:
            SecureError: setup() has not run.
        """
        st = self._require_setup()
        key_b = st.he_b.pk
        return st.params, {
            "active_key": modulus_state(key_b),
            "q_a": [q.copy() for q in st.q_a],
            "q_b": [cipher_state(table, key_b) for table in st.q_b.tables],
            "w_b": cipher_state(st.w_b, key_b),
            "masks": st.masks.state_dict(),
        }

    def _started(self) -> bool:
        return self._state is not None

    def _load_saved(self, params: EmbedParams, state: LayerState) -> None:
        what = self._saved_as
        with reading(what):
            params.check()
            self._check_params(params, self.vocab_sizes)
            key_b = public_key_from_state(state["active_key"], self.active_id, self.config)
            q_a, tables = self._load_tables(state, params, key_b, what)
            h_lay, d_lay = params.h_layout(), params.d_layout(len(self.vocab_sizes))
            shape = (self.in_dim, h_lay.cols)
            w_b = cipher_from_state(state["w_b"], key_b, shape, f"{what}: [[W]]")
            masks = ZeroSumMasks.from_state(state["masks"])
        he_b = self._crypto.add_peer(key_b)
        wire = self._wire_to(self.active_id)
        self._state = _State(params, he_b, wire, h_lay, d_lay, q_a, tables, w_b, masks)

    def _load_tables(
        self, state: LayerState, params: EmbedParams, key_b: PublicKey, what: str
    ) -> tuple[list[np.ndarray], EncryptedTables]:
        """Q^A and [[Q^B]]_B of every field from a `state_dict()`."""
        layout, sizes = params.e_layout(len(self.vocab_sizes)), self.vocab_sizes
        if len(state["q_a"]) != len(sizes) or len(state["q_b"]) != len(sizes):
            raise StateError(f"{what} holds tables of another number of fields than {len(sizes)}")
        q_a, tables = [], []
        for f, vocab in enumerate(sizes):
            shape = (vocab, self.emb_dim)
            q_a.append(array_from_state(state["q_a"][f], shape, f"{what}: Q^A", np.int64))
            shape = (vocab, len(layout.segments[f]))
            tables.append(cipher_from_state(state["q_b"][f], key_b, shape, f"{what}: [[Q^B]]"))
        return q_a, EncryptedTables(layout, tables, key_b)

    def _own_shares(self, params: EmbedParams) -> tuple[list[np.ndarray], np.ndarray]:
        """Q^A (fixed, int64 at f_E) and the initial share W^A (int64 at f_W)."""
        rng = private_rng(self.seed, self._crypto.keypair.private, "embed-passive")
        tables = initial_tables(self._init, "Q_A", self.vocab_sizes, self.emb_dim, rng)
        q_a = [encode_table(t, params.feature_bits, params.e_bits) for t in tables]
        w_a = initial_share(self._init, "W_A", self.in_dim, self.out_dim, rng)
        return q_a, encode(w_a, params.weight_bits)

    def _check_params(self, params: EmbedParams, expected: tuple[int, ...]) -> None:
        """`expected`: the vocabulary sizes the active party expects of this party.

        Raises:
            PayloadError: the active party's layer has other sizes, does not name this
                party, uses another key size or expects other fields.
        """
        me = self.channel.party_id
        sizes = (params.out_dim, params.emb_dim) == (self.out_dim, self.emb_dim)
        if not sizes or me not in params.passive_ids:
            raise PayloadError(
                f"the active party runs an embed layer of k={params.emb_dim}, h={params.out_dim} "
                f"with passive parties {list(params.passive_ids)}; this party ('{me}') expects "
                f"k={self.emb_dim}, h={self.out_dim}"
            )
        check_active_key_bits(params.key_bits, self.config)
        if expected != self.vocab_sizes:
            raise PayloadError(
                f"the active party expects {len(expected)} fields of sizes {list(expected)}, "
                f"this party has {len(self.vocab_sizes)} of sizes {list(self.vocab_sizes)}"
            )

    def _recv_tables(
        self, wire: Wire, p: str, key_b: PublicKey, params: EmbedParams
    ) -> EncryptedTables:
        layout, tables = params.e_layout(len(self.vocab_sizes)), []
        for f, vocab in enumerate(self.vocab_sizes):
            shape = (vocab, len(layout.segments[f]))
            table = wire.recv(f"{p}/q_b/{f}", key_b, shape, layout.slots, params.feature_bits)
            tables.append(table.rows)
        return EncryptedTables(layout, tables, key_b)

    def forward(self, tag: str, codes: np.ndarray) -> None:
        """Run this party's part of the forward exchange for a batch of codes (N x F).

        Raises:
            VocabularyError: codes of the wrong shape or outside a vocabulary (before
                anything is sent).
            PayloadError, ChannelError: the active party's message is bad or missing.
            SecureError: setup() has not run.
        """
        st = self._require_setup()
        codes = check_codes(codes, self.vocab_sizes)
        n, prm, he_b, lay = len(codes), st.params, st.he_b, st.q_b.layout
        e_a = np.concatenate([q[codes[:, f]] for f, q in enumerate(st.q_a)], axis=1)
        r = uniform_matrix(n, self.in_dim, prm.e_bits + prm.stat_bits)
        lookup = add_plain_rows(he_b, st.q_b.lookup(codes), negated(lay.pack(r)))
        st.wire.send(f"{tag}/e", sealed(he_b, lookup, lay.slots, prm.feature_bits))
        e_a = e_a + r  # E'_A = E^A + R; B holds E'_B = E^B - R
        cols, own, f_z = st.h_lay.cols, self._crypto.own, prm.output_bits
        eaw = self._crypto.matmul.matmul(e_a, st.w_b, he_b.pk.nsquare, cols)
        c = st.wire.recv(f"{tag}/c", own.pk, (n, cols), st.h_lay.slots, f_z)
        plain = decrypt_rows(own, c)
        self._decrypted(f"{tag}/c", plain)
        if st.masks.active:
            zero_sum = st.masks.next_masks(tag, n, cols, int(he_b.pk.n))
            pairs = zip(plain, zero_sum, strict=True)
            plain = [[a + m for a, m in zip(p, q, strict=True)] for p, q in pairs]
        z = add_plain_rows(he_b, eaw, plain)
        st.wire.send(f"{tag}/z", sealed(he_b, z, st.h_lay.slots, f_z))
        self._pending.remember(tag, (codes, e_a))

    def backward(self, tag: str, lr: float) -> None:
        """Apply the active party's encrypted step to [[W]]_B and to the looked-up rows of
        [[Q^B]]_B, and send the active party its masked share of the weight step.

        The active party folds its learning rate into [[lr G]]; `lr` is only checked.

        Raises:
            PayloadError, ChannelError: a message of the active party is bad or missing.
            SecureError: setup() has not run, or no forward step is pending.
        """
        st = self._require_setup()
        check_lr(lr)
        codes, e_a = self._pending.take(tag)
        n, prm, he_b, cols = len(codes), st.params, st.he_b, st.h_lay.cols
        m3 = st.wire.recv(f"{tag}/m3", he_b.pk, (n, cols), st.h_lay.slots, prm.grad_bits)
        shape = (self.in_dim, cols)
        pb = st.wire.recv(f"{tag}/pb", he_b.pk, shape, st.h_lay.slots, prm.weight_bits)
        ndw = self._crypto.matmul.matmul(-e_a.T, m3.rows, he_b.pk.nsquare, cols)
        ndw = add_rows(he_b, ndw, pb.rows)  # [[-dW]]_B = -E'_A^T [[lr G]] + [[-E'_B^T lr G]]
        st.w_b = add_rows(he_b, st.w_b, ndw)
        self._send_weight_step(tag, st, ndw)
        self._update_tables(tag, st, codes)

    def _send_weight_step(self, tag: str, st: _State, ndw: list[list[mpz]]) -> None:
        """y = [[-dW - Phi]]_B, and [[Phi]]_A in both of the active party's layouts of W."""
        prm, own, he_b, f_w = st.params, self._crypto.own, st.he_b, st.params.weight_bits
        phi = uniform_matrix(self.in_dim, self.out_dim, prm.slot_bits + prm.stat_bits)
        packed = st.h_lay.pack(phi.tolist())
        y = add_plain_rows(he_b, ndw, negated(packed))
        st.wire.send(f"{tag}/y", sealed(he_b, y, st.h_lay.slots, f_w))
        st.wire.send(f"{tag}/phi", encrypt_rows(own, packed, st.h_lay.slots, f_w))
        phit = st.d_lay.pack(phi.T.tolist())
        st.wire.send(f"{tag}/phit", encrypt_rows(own, phit, st.d_lay.slots, f_w))

    def _update_tables(self, tag: str, st: _State, codes: np.ndarray) -> None:
        """[[Q^B]][x] += -round(P / 2^trunc) + [[-round(S / 2^trunc)]]_B, P = dE - S.

        de is decrypted before st is received: the active party encrypts st meanwhile."""
        n, prm, own, lay = len(codes), st.params, self._crypto.own, st.q_b.layout
        scale = prm.grad_bits + prm.weight_bits
        de = st.wire.recv(f"{tag}/de", own.pk, (n, st.d_lay.cols), st.d_lay.slots, scale)
        try:
            masked = st.d_lay.unpack(decrypt_rows(own, de))
        except ValueError as exc:
            raise PayloadError(f"the masked embedding step does not fit its slots: {exc}") from exc
        self._decrypted(f"{tag}/de", masked)
        p_t = round_shift(np.array(masked, dtype=object), prm.trunc_bits)
        shape = (n, st.q_b.segment_count)
        s_t = st.wire.recv(f"{tag}/st", st.he_b.pk, shape, lay.slots, prm.feature_bits)
        st.q_b.add(codes, negated(segment_rows(lay, p_t.tolist())), s_t.rows)

    def _require_setup(self) -> _State:
        """This party's state after setup.

        Raises:
            SecureError: setup() (or load_state_dict()) has not run.
        """
        if self._state is None:
            raise SecureError("call setup() before forward() or backward()")
        return self._state
