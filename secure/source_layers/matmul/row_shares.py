"""m1 once per row: the masked term S_i = X_B,i U_B^k - R_i of every row, made at setup.

U_B^k never changes, so the m1 of a row is the same in every epoch, validation pass and
local update. Instead of m1 per batch (docs/protocols.md §4, Forward), the active party
B sends, once per job and row set (the training rows, the validation rows), the m1 of
every row; the passive party A_k decrypts it and keeps S_i per row, B keeps R_i per row.
A forward step over rows of such a set sends no m1: A adds the S of the batch's rows,
grouped as the step's m2 groups them, and B adds the same rows' R.

Layout of the setup ciphertexts. One row's part of a column ciphertext is C = s_r * w
bits (s_r = min(h, slots) slots of w bits). Its mask R_i is uniform in [0, 2^(C + sigma)),
so the chunk P_i - R_i (P_i = the packed X_B,i U_B^k) hides P_i within 2^-sigma on its
own, and spans C + sigma + 2 bits signed. Chunks are spaced by C' = C + sigma + 2 bits,
r = (key_bits - 2) // C' rows per ciphertext, so A reads every chunk exactly (signed
digits base 2^C') and each row's S_i stands alone: any later grouping works. In a step,
A adds sum_t S_(row t) 2^(t C) (the m2 layout, rows C bits apart) and B adds
sum_t R_(row t) 2^(t C); the sum is exactly sum_t P_(row t) 2^(t C), as with a fresh m1.

What each party sees is that of one epoch of per-batch m1 (docs/security.md, "m1 once
per row"): A sees each row's S_i once, statistically independent of X_B and U_B; B sees
Dec(m2) = (A's terms) + P - R for an R it knows, i.e. exactly what it saw before.
Cost: ceil(N / r) setup ciphertexts per row set (r = 2 for a 16-wide layer at 2048
bits, 48-slot packing puts 3 rows in an m1), against ceil(N / k) per epoch per set, so
it pays from the second use of the rows (`worth_it`).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

import numpy as np
from vfl.secure.errors import PayloadError, SecureError, StateError
from vfl.secure.source_layers.matmul.row_packing import RowLayout

CHUNK_CIPHERTEXTS = 1024  # setup ciphertexts per message (512 KB at 2048 bits)


@dataclass(frozen=True)
class RowChunks:
    """How the setup m1 of one layer lays out rows (see the module doc)."""

    row_bits: int  # C: one row's part of a column plaintext
    stat_bits: int  # sigma
    key_bits: int

    @classmethod
    def of(
        cls, out_dim: int, slots: int, slot_bits: int, stat_bits: int, key_bits: int
    ) -> RowChunks:
        return cls(min(out_dim, slots) * slot_bits, stat_bits, key_bits)

    @property
    def mask_bits(self) -> int:
        return self.row_bits + self.stat_bits

    @property
    def spacing(self) -> int:
        """C': bits between two rows' chunks in a setup plaintext."""
        return self.row_bits + self.stat_bits + 2

    @property
    def rows_per_cipher(self) -> int:
        return max(1, (self.key_bits - 2) // self.spacing)

    def layout(self) -> RowLayout:
        """The chunk layout as a `RowLayout` (one "slot" of C' bits per row), for
        `ShiftedCopies` and grouping."""
        return RowLayout(self.rows_per_cipher, 1, self.spacing)

    def masks(self, rows: int, cols: int) -> list[list[int]]:
        """Fresh R_i per row and column, uniform in [0, 2^(C + sigma))."""
        return [[secrets.randbits(self.mask_bits) for _ in range(cols)] for _ in range(rows)]

    def setup_masks(self, masks: list[list[int]]) -> list[list[int]]:
        """The plaintext mask of each setup ciphertext: sum_t R_(g r + t) 2^(t C')."""
        return group_shifted(masks, self.rows_per_cipher, self.spacing)

    def split(self, plain: list[list[int]], rows: int) -> list[list[int]]:
        """A's S_i per row from the decrypted setup plaintexts (signed, groups x cols).

        Raises:
            PayloadError: a plaintext is not a sum of chunks of this layout.
        """
        r, spacing = self.rows_per_cipher, self.spacing
        base, half, limit = 1 << spacing, 1 << (spacing - 1), 1 << (self.mask_bits + 1)
        out: list[list[int]] = []
        for group in plain:
            digits = []
            for value in group:
                column = []
                for _ in range(r):
                    d = value % base
                    if d >= half:
                        d -= base
                    if abs(d) >= limit:
                        raise PayloadError("a setup m1 chunk lies outside its range")
                    column.append(d)
                    value = (value - d) >> spacing
                if value:
                    raise PayloadError("a setup m1 holds more than its chunks")
                digits.append(column)
            out.extend([digits[c][t] for c in range(len(group))] for t in range(r))
        return out[:rows]


def grouped_rows(
    table: list[list[int]] | None, rows: tuple[str, np.ndarray], n: int, k: int, row_bits: int
) -> list[list[int]]:
    """The per-row values (S_i at A, R_i at B) of `rows` = (set, indices) of a batch of
    `n` rows, grouped k to a ciphertext as m2 groups them.

    Raises:
        SecureError: the set was not precomputed, or the indices do not fit the batch.
    """
    name, indices = rows
    if table is None or len(indices) != n:
        raise SecureError(f"rows of set '{name}' were not precomputed (call precompute)")
    return group_shifted([table[int(i)] for i in indices], k, row_bits)


def group_shifted(values: list[list[int]], rows: int, shift: int) -> list[list[int]]:
    """Per-row integers (N x cols) to groups of `rows`: sum_t values[g rows + t] 2^(t shift);
    missing rows of the last group count as 0."""
    groups = []
    for start in range(0, len(values), rows):
        part = values[start : start + rows]
        groups.append(
            [sum(row[c] << (t * shift) for t, row in enumerate(part)) for c in range(len(part[0]))]
        )
    return groups


def worth_it(uses: int, chunks: RowChunks, layout: RowLayout) -> bool:
    """Whether rows used `uses` times cost fewer ciphertexts with setup m1 (N / r once)
    than with per-step m1 (N / k each time)."""
    return uses * chunks.rows_per_cipher > layout.rows


def to_state(values: list[list[int]], bits: int) -> dict[str, Any]:
    """Per-row signed integers of |v| < 2^(bits - 1) as one blob."""
    width, offset = (bits + 7) // 8, 1 << (bits - 1)
    cols = len(values[0]) if values else 0
    blob = b"".join((v + offset).to_bytes(width, "big") for row in values for v in row)
    return {"rows": len(values), "cols": cols, "bits": bits, "blob": blob}


def from_state(state: dict[str, Any], bits: int, what: str) -> list[list[int]]:
    """Raises:
    StateError: another width, or a blob of the wrong size.
    """
    rows, cols, blob = int(state["rows"]), int(state["cols"]), bytes(state["blob"])
    width, offset = (bits + 7) // 8, 1 << (bits - 1)
    if int(state["bits"]) != bits or len(blob) != rows * cols * width:
        raise StateError(f"{what}: saved per-row values do not fit this layer")
    flat = [int.from_bytes(blob[i : i + width], "big") - offset for i in range(0, len(blob), width)]
    return [flat[i * cols : (i + 1) * cols] for i in range(rows)]
