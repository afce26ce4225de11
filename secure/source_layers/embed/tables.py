"""A passive party's encrypted table shares [[Q^B_f]]_B: lookups and scatter-adds.

Row v of field f is stored as one ciphertext per segment of the field in the E layout
(`secure.source_layers.embed.packing.FieldLayout`), its values already at their slot positions. A
lookup multiplies the stored ciphertexts of a batch row's codes into its packed [[E^B]]
row; an update multiplies a step into exactly the rows looked up, repeated codes
accumulating. Only the passive party, who knows the codes, touches these tables.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from gmpy2 import mpz
from vfl.secure.paillier.keys import PublicKey
from vfl.secure.source_layers.embed.packing import FieldLayout


def segment_rows(layout: FieldLayout, values: Sequence[Sequence[int]]) -> list[list[int]]:
    """Rows of F*k integers to rows of one packed integer per (field, segment)."""
    k = layout.emb_dim
    return [
        [
            layout.pack_segment(row[f * k : (f + 1) * k], seg)
            for f, parts in enumerate(layout.segments)
            for seg in parts
        ]
        for row in values
    ]


def table_rows(layout: FieldLayout, field: int, table: np.ndarray) -> list[list[int]]:
    """A table (V_f x k integers) in its storage form: one packed integer per segment."""
    parts = layout.segments[field]
    return [[layout.pack_segment(row, seg) for seg in parts] for row in table.tolist()]


class EncryptedTables:
    """[[Q^B_f]]_B for every field of one passive party, held by that party."""

    def __init__(self, layout: FieldLayout, tables: list[list[list[mpz]]], key: PublicKey):
        self.layout = layout
        self.tables = tables
        self.key = key

    @property
    def segment_count(self) -> int:
        return sum(len(parts) for parts in self.layout.segments)

    def lookup(self, codes: np.ndarray) -> list[list[mpz]]:
        """[[E^B]] rows (N x layout.cols) for checked codes (N x F)."""
        nsq, out = self.key.nsquare, []
        for row in codes.tolist():
            packed = [mpz(1)] * self.layout.cols
            for f, parts in enumerate(self.layout.segments):
                stored = self.tables[f][row[f]]
                for s, seg in enumerate(parts):
                    packed[seg.col] = packed[seg.col] * stored[s] % nsq
            out.append(packed)
        return out

    def add(self, codes: np.ndarray, plain: list[list[int]], cipher: list[list[mpz]]) -> None:
        """Add plaintext and encrypted steps (one packed value per (row, field segment),
        as from `segment_rows`) into the looked-up rows; repeated codes accumulate."""
        n, nsq = self.key.n, self.key.nsquare
        for row, p_row, c_row in zip(codes.tolist(), plain, cipher, strict=True):
            at = 0
            for f, parts in enumerate(self.layout.segments):
                stored = self.tables[f][row[f]]
                for s in range(len(parts)):
                    g_m = 1 + (p_row[at] % n) * n  # g^m with g = n + 1
                    stored[s] = stored[s] * c_row[at] % nsq * g_m % nsq
                    at += 1
