"""The active party's state and steps for one passive party of the Embed-MatMul layer.

B holds W only encrypted under that party's key, in two layouts: [[W]]_A (rows of W
packed along h, for E'_B W) and [[W^T]]_A (rows of W^T packed along F*k, for lr G W^T).
Message names are those of `secure.source_layers.embed.active`.
"""

from __future__ import annotations

import numpy as np
from gmpy2 import mpz
from vfl.secure.errors import PayloadError, SecureError
from vfl.secure.paillier.cipher_matmul import CipherMatmul
from vfl.secure.paillier.engine import Paillier
from vfl.secure.source_layers.common import Wire, shaped
from vfl.secure.source_layers.embed.common import (
    add_plain_rows,
    add_rows,
    decrypt_rows,
    encrypt_rows,
    negated,
    sealed,
)
from vfl.secure.source_layers.embed.packing import (
    FieldLayout,
    SlotLayout,
    exact_matmul,
    round_shift,
    uniform_ints,
    uniform_matrix,
)
from vfl.secure.source_layers.embed.setup import EmbedParams
from vfl.secure.source_layers.embed.tables import segment_rows
from vfl.secure.source_layers.state import (
    LayerState,
    cipher_from_state,
    cipher_state,
    modulus_state,
)


class PassiveLink:
    """B's view of one passive party: its key, layouts and B's encrypted copies of W."""

    def __init__(
        self, wire: Wire, he: Paillier, params: EmbedParams, fields: int, matmul: CipherMatmul
    ) -> None:
        self.wire, self.he, self.params, self.matmul = wire, he, params, matmul
        self.e_lay: FieldLayout = params.e_layout(fields)
        self.d_lay: SlotLayout = params.d_layout(fields)
        self.h_lay: SlotLayout = params.h_layout()
        self.w_a: list[list[mpz]] = []  # [[W]]_A, F*k rows x h-layout columns
        self.wt_a: list[list[mpz]] = []  # [[W^T]]_A, h rows x D-layout columns

    @property
    def in_dim(self) -> int:
        return self.e_lay.width

    def receive_weights(self, p: str, w_b: np.ndarray) -> None:
        """[[W^A]]_A in both layouts, plus B's share W^B (int64 at f_W): [[W]]_A, [[W^T]]_A.

        Raises:
            PayloadError, ChannelError: a share is malformed or missing.
        """
        pk, h_lay, d_lay, f_w = self.he.pk, self.h_lay, self.d_lay, self.params.weight_bits
        w_a = self.wire.recv(f"{p}/w_a", pk, (self.in_dim, h_lay.cols), h_lay.slots, f_w)
        shape = (self.params.out_dim, d_lay.cols)
        wt_a = self.wire.recv(f"{p}/wt_a", pk, shape, d_lay.slots, f_w)
        self.w_a = add_plain_rows(self.he, w_a.rows, h_lay.pack(w_b.tolist()))
        self.wt_a = add_plain_rows(self.he, wt_a.rows, d_lay.pack(w_b.T.tolist()))

    def state_dict(self) -> LayerState:
        """That party's public key and B's [[W]]_A and [[W^T]]_A."""
        pk = self.he.pk
        return {
            "key": modulus_state(pk),
            "w_a": cipher_state(self.w_a, pk),
            "wt_a": cipher_state(self.wt_a, pk),
        }

    def load_state_dict(self, saved: LayerState, what: str) -> None:
        """[[W]]_A and [[W^T]]_A from a `state_dict()` (its key is this link's already).

        Raises:
            StateError: another shape, or not ciphertexts of that party's key.
        """
        pk, peer = self.he.pk, self.wire.peer
        h_shape, d_shape = (self.in_dim, self.h_lay.cols), (self.params.out_dim, self.d_lay.cols)
        self.w_a = cipher_from_state(saved["w_a"], pk, h_shape, f"{what}: [[W]] of '{peer}'")
        self.wt_a = cipher_from_state(saved["wt_a"], pk, d_shape, f"{what}: [[W^T]] of '{peer}'")

    def receive_embeddings(self, tag: str, own: Paillier, n: int | None) -> np.ndarray:
        """Decrypt e = [[E^B - R]]_B to B's share E'_B (N x F*k int64).

        Raises:
            PayloadError: an empty batch, another batch size than `n`, or a bad payload.
            SecureError: an embedding share left its slot range.
        """
        prm, lay = self.params, self.e_lay
        e = self.wire.recv(f"{tag}/e", own.pk, (n, lay.cols), lay.slots, prm.feature_bits)
        if not e.rows:
            raise PayloadError(f"party '{self.wire.peer}' sent an empty batch")
        e_b = np.array(lay.unpack(decrypt_rows(own, e)), dtype=np.int64)
        low = -(1 << (prm.e_bits + prm.stat_bits)) - (1 << (prm.e_bits - 1))
        if e_b.min() < low or e_b.max() >= 1 << (prm.e_bits - 1):
            raise SecureError(
                f"an embedding share of party '{self.wire.peer}' left its slot range "
                f"(|Q share| < 2^{prm.e_bits - 1 - prm.feature_bits}); lower the learning rate"
            )
        return e_b

    def send_cross_term(self, tag: str, e_b: np.ndarray) -> list[int]:
        """Send c = [[E'_B W - M]]_A and return the mask M (flat, one per packed value)."""
        he, cols, prm = self.he, self.h_lay.cols, self.params
        product = self.matmul.matmul(e_b, self.w_a, he.pk.nsquare, cols)
        mask = uniform_ints(len(e_b) * cols, prm.cross_mask_bits)
        c = add_plain_rows(he, product, shaped([-m for m in mask], cols))
        self.wire.send(f"{tag}/c", sealed(he, c, self.h_lay.slots, prm.output_bits))
        return mask

    def send_steps(self, tag: str, own: Paillier, e_b: np.ndarray, g: np.ndarray) -> np.ndarray:
        """pb = [[-E'_B^T lr G]]_B (exact) and de = [[lr G W^T - S]]_A (W before this step's
        update); returns the mask S for `send_table_step`."""
        prm, he, d_lay, h_lay = self.params, self.he, self.d_lay, self.h_lay
        product = negated(h_lay.pack(exact_matmul(e_b.T, g).tolist()))
        self.wire.send(f"{tag}/pb", encrypt_rows(own, product, h_lay.slots, prm.weight_bits))
        d_e = self.matmul.matmul(g, self.wt_a, he.pk.nsquare, d_lay.cols)
        s = uniform_matrix(len(g), self.in_dim, prm.slot_bits + prm.stat_bits)
        d_e = add_plain_rows(he, d_e, negated(d_lay.pack(s.tolist())))
        scale = prm.grad_bits + prm.weight_bits
        self.wire.send(f"{tag}/de", sealed(he, d_e, d_lay.slots, scale))
        return s

    def send_table_step(self, tag: str, own: Paillier, s: np.ndarray) -> None:
        """st = [[-round(S / 2^trunc)]]_B, one ciphertext per (row, field segment): sent
        after de, so that the passive party decrypts de while this party encrypts st."""
        prm = self.params
        s_t = negated(segment_rows(self.e_lay, round_shift(s, prm.trunc_bits).tolist()))
        self.wire.send(f"{tag}/st", encrypt_rows(own, s_t, self.e_lay.slots, prm.feature_bits))

    def apply_weight_step(self, tag: str, own: Paillier) -> None:
        """[[W]]_A and [[W^T]]_A += [[Phi]]_A + (-dW - Phi), from y, phi and phit.

        Raises:
            PayloadError, ChannelError: an answer is malformed, overflows or is missing.
        """
        he, f_w, h_lay, d_lay = self.he, self.params.weight_bits, self.h_lay, self.d_lay
        h_shape = (self.in_dim, h_lay.cols)
        y = self.wire.recv(f"{tag}/y", own.pk, h_shape, h_lay.slots, f_w)
        phi = self.wire.recv(f"{tag}/phi", he.pk, h_shape, h_lay.slots, f_w)
        d_shape = (self.params.out_dim, d_lay.cols)
        phit = self.wire.recv(f"{tag}/phit", he.pk, d_shape, d_lay.slots, f_w)
        try:
            step = h_lay.unpack(decrypt_rows(own, y))
        except ValueError as exc:
            raise PayloadError(f"party '{self.wire.peer}' sent an overflowing step: {exc}") from exc
        self.w_a = add_plain_rows(he, add_rows(he, self.w_a, phi.rows), h_lay.pack(step))
        step_t = d_lay.pack(zip(*step, strict=True))
        self.wt_a = add_plain_rows(he, add_rows(he, self.wt_a, phit.rows), step_t)
