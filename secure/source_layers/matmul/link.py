"""The active party's state and m1 for one passive party of the MatMul layer.

B holds [[U_B^k]] under A_k's key (A_k sent it at setup) and keeps it shifted by
0..k-1 batch rows (`matmul.row_packing.ShiftedCopies`), so that the m1 of a step is one
grouped ciphertext product:

    m1_k = [[X_B U_B^k - R_k]]_Ak    per step, rows grouped as m2 groups them
    s<i>                             per precomputed row set (`matmul.row_shares`): every
                                     row's m1 once, in chunks of `CHUNK_CIPHERTEXTS`

Message names are those of `secure.source_layers.matmul.active`.
"""

from __future__ import annotations

from dataclasses import dataclass

import scipy.sparse as sp
from gmpy2 import mpz
from vfl.secure.errors import StateError
from vfl.secure.paillier.cipher_matmul import CipherMatmul
from vfl.secure.paillier.cipher_matrix import CipherMatrix
from vfl.secure.paillier.encoding import Packer
from vfl.secure.paillier.engine import Paillier
from vfl.secure.source_layers.common import Wire, flat, shaped
from vfl.secure.source_layers.matmul.row_packing import ShiftedCopies
from vfl.secure.source_layers.matmul.row_shares import CHUNK_CIPHERTEXTS, RowChunks
from vfl.secure.source_layers.matmul.setup import LayerParams
from vfl.secure.source_layers.sharing import statistical_masks
from vfl.secure.source_layers.state import (
    LayerState,
    cipher_from_state,
    cipher_state,
    modulus_state,
    public_key_from_state,
)


@dataclass
class PassiveLink:
    """B's view of one passive party: its key context, feature count and scale, and
    [[U_B^k]] under its key with its row-shifted copies."""

    wire: Wire  # to and from that party
    he: Paillier  # under that party's public key
    in_dim: int
    feature_bits: int
    enc_u_b: CipherMatrix  # [[U_B^k]] under that party's key
    u_b_copies: ShiftedCopies  # [[U_B^k]] shifted by 0..k-1 rows (`row_packing`)
    params: LayerParams
    packer: Packer

    @classmethod
    def of(
        cls,
        wire: Wire,
        he: Paillier,
        in_dim: int,
        feature_bits: int,
        enc_u_b: CipherMatrix,
        params: LayerParams,
        packer: Packer,
    ) -> PassiveLink:
        """The link of a received or restored [[U_B^k]] (its copies shifted now)."""
        copies = ShiftedCopies(enc_u_b.rows, params.layout(), he.pk.nsquare, he.threads)
        return cls(wire, he, in_dim, feature_bits, enc_u_b, copies, params, packer)

    @classmethod
    def receive(
        cls,
        wire: Wire,
        prefix: str,
        info: tuple[Paillier, int, int],
        params: LayerParams,
        packer: Packer,
    ) -> PassiveLink:
        """The link of a passive party once its [[U_B^k]] (`<prefix>/u_b`) arrives;
        `info`: its key context, feature count and feature scale.

        Raises:
            PayloadError, ChannelError: [[U_B^k]] is malformed or missing.
        """
        he, in_dim, bits = info
        scale = params.weight_bits(params.active_feature_bits)
        shape = (params.active_in_dim, packer.columns(params.out_dim))
        tag = f"{prefix}/u_b"
        enc_u_b = wire.recv(tag, he.pk, shape, packer.slots, scale, refill=False)
        return cls.of(wire, he, in_dim, bits, enc_u_b, params, packer)

    @classmethod
    def restore(cls, wire: Wire, saved: LayerState, params: LayerParams, what: str) -> PassiveLink:
        """The link of the passive party at the other end of `wire` from its
        `state_dict()` (its key joins the party's crypto bundle).

        Raises:
            StateError: a bad feature count or scale, or [[U_B^k]] of another shape or key.
            PaillierKeyError: the saved key is below the minimum size.
            PayloadError: the party's feature scale leaves no room for its [[eta G]].
        """
        pid, crypto = wire.peer, wire.crypto
        key = public_key_from_state(saved["key"], pid, crypto.config)
        in_dim, bits = int(saved["in_dim"]), int(saved["feature_bits"])
        if in_dim < 1 or not 0 <= bits <= 32:
            raise StateError(f"{what}: party '{pid}' has in_dim={in_dim}, feature_bits={bits}")
        params.grad_bits(bits)
        packer = params.packer()
        cols = packer.columns(params.out_dim)
        shape = (params.active_in_dim, cols)
        rows = cipher_from_state(saved["u_b"], key, shape, f"{what}: [[U_B]] of '{pid}'")
        he = crypto.add_peer(key)
        scale = params.weight_bits(params.active_feature_bits)
        enc_u_b = CipherMatrix(rows, cols, key, packer.slots, scale)
        return cls.of(wire, he, in_dim, bits, enc_u_b, params, packer)

    @property
    def party_id(self) -> str:
        return self.wire.peer

    @property
    def cols(self) -> int:
        return self.packer.columns(self.params.out_dim)

    def state_dict(self) -> LayerState:
        """That party's public key, feature count and scale, and [[U_B^k]]."""
        return {
            "key": modulus_state(self.he.pk),
            "in_dim": self.in_dim,
            "feature_bits": self.feature_bits,
            "u_b": cipher_state(self.enc_u_b.rows, self.he.pk),
        }

    def send_m1(
        self, tag: str, matmul: CipherMatmul, exps: sp.csr_matrix, groups: int
    ) -> list[list[int]]:
        """Send m1 = [[X_B U_B^k - R_k]]_Ak for a batch of `groups` row groups; return R_k."""
        product = flat(self.u_b_copies.product(matmul, exps, self.cols))
        masks = statistical_masks(groups, self.cols, self.packer.mask_bits)
        self._send(f"{tag}/m1", self._masked(product, flat(masks)))
        return masks

    def send_rows(
        self, tag: str, matmul: CipherMatmul, exps: sp.csr_matrix, chunks: RowChunks
    ) -> list[list[int]]:
        """Send the m1 of every row of a set (`exps`: all its rows), in messages
        `<tag>/s<i>` of `CHUNK_CIPHERTEXTS` rows of ciphertexts; return each row's R_i."""
        he, cols = self.he, self.cols
        copies = ShiftedCopies(self.enc_u_b.rows, chunks.layout(), he.pk.nsquare, he.threads)
        masks = chunks.masks(exps.shape[0], cols)
        plain = flat(chunks.setup_masks(masks))
        m1 = self._masked(flat(copies.product(matmul, exps, cols)), plain)
        step = CHUNK_CIPHERTEXTS * cols
        for part, start in enumerate(range(0, len(m1), step)):
            self._send(f"{tag}/s{part}", m1[start : start + step])
        return masks

    def _masked(self, product: list[mpz], masks: list[int]) -> list[mpz]:
        """[[X_B U_B^k]] - R (flat), re-randomised."""
        he = self.he
        return he.rerandomize(he.add_plain(product, [-r for r in masks]))

    def _send(self, tag: str, values: list[mpz]) -> None:
        cols, pk = self.cols, self.he.pk
        matrix = CipherMatrix(
            shaped(values, cols), cols, pk, self.packer.slots, self.params.output_bits
        )
        self.wire.send(tag, matrix)
