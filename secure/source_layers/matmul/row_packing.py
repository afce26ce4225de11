"""Row packing of m1 and m2: k rows of h outputs share one ciphertext when k * h <= slots.

Layout: row t of a group of k rows fills slots t*h .. t*h + h - 1, so a group's plaintext
is sum_t P(row_t) * 2^(t*h*w) (w: slot width), exactly what `Packer.pack` makes of the
group's rows laid side by side. Packing, statistical masks (slots*w + sigma bits, so a
group is hidden as a row was) and unpacking are therefore the Packer's, applied to a
(groups x k*h) matrix; only the number of ciphertexts (and of obfuscators and
decryptions) drops from N to ceil(N / k) per message.

Products: a group's [[X U]] needs U's ciphertexts shifted by t*h*w bits, t < k:
[[U * 2^s]] = [[U]]^(2^s) (s squarings, no obfuscator). Two ways to get there:
- shifted copies (`ShiftedCopies`): keep [[U << t rows]] for every t < k; group g is then
  prod_t prod_b [[U_b << t]]^X[g*k + t, b], an ordinary ciphertext matrix product of the
  grouped exponents (groups x k*d: rows g*k .. g*k + k - 1 side by side) with the k
  copies stacked. Free per step for a fixed matrix (B's [[U_B]], shifted once at setup);
  an updated one ([[V_A]] at a passive party) costs d_A * (k - 1) shifts per update.
- Horner's rule (`HornerRows`): compute each row's [[x_i U]] unshifted, then fold a group
  as ((r_{k-1} << 1) * r_{k-2} << 1) * ... * r_0: (k - 1) shifts per group, N (k-1)/k per
  product, whatever d_A. A passive party with many features (a9a: d_A = 73, h = 1) uses
  this; one with few (the credit table: d_A = 13, h = 8) keeps copies (`packed_products`).
m3 stays one ciphertext per row: X_A^T [[eta G]] needs each row's G in a ciphertext of
its own.

Choice of k: per step, every row that joins a group saves 2 obfuscators (fixed-base) and
2 CRT decryptions, C ~ 24 S in the unit S = shifting one ciphertext by one 62-bit slot
(2048-bit keys, measured by bench/secure_step.py); the passive party's shifts cost
h * (k - 1) * min(d_A, N / k) S per step. `choose_rows` minimises their sum for a batch
of 256 rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from gmpy2 import mpz
from vfl.secure.paillier.cipher_matmul import CipherMatmul
from vfl.secure.paillier.fixed_base import parallel_powmod

ROW_VS_SHIFT = 24  # C / S above
REFERENCE_BATCH = 256


def choose_rows(width: int, slots: int, max_in_dim: int, limit: int | None = None) -> int:
    """Rows per ciphertext for outputs of `width` slots and a passive party with at most
    `max_in_dim` features; `limit` caps it (1 disables row packing)."""
    top = slots // width if width <= slots else 1
    if limit is not None:
        top = min(top, limit)
    top = max(1, top)

    def cost(k: int) -> float:
        shifted_rows = min(max_in_dim, REFERENCE_BATCH / k)  # copies or Horner, the cheaper
        return ROW_VS_SHIFT * REFERENCE_BATCH / k + shifted_rows * width * (k - 1)

    return min(range(1, top + 1), key=cost)


@dataclass(frozen=True)
class RowLayout:
    """`rows` batch rows of `width` outputs per ciphertext, slots of `slot_bits` bits."""

    rows: int
    width: int
    slot_bits: int

    @property
    def shift_bits(self) -> int:
        """Bits between two rows of one group."""
        return self.width * self.slot_bits

    def groups(self, n: int) -> int:
        return -(-n // self.rows)

    def group_exponents(self, exps: sp.csr_matrix) -> sp.csr_matrix:
        """N x d exponents to groups x (k*d): row g holds rows g*k .. g*k + k - 1."""
        if self.rows == 1:
            return exps
        n, d = exps.shape
        pad = self.groups(n) * self.rows - n
        if pad:
            exps = sp.vstack([exps, sp.csr_matrix((pad, d), dtype=exps.dtype)], format="csr")
        return sp.csr_matrix(exps.reshape((self.groups(n), self.rows * d)))

    def group_values(self, values: np.ndarray) -> np.ndarray:
        """N x h values to groups x (k*h), zero-padded."""
        values = np.asarray(values)
        if self.rows == 1:
            return values
        n, h = values.shape
        out = np.zeros((self.groups(n) * self.rows, h), dtype=values.dtype)
        out[:n] = values
        return out.reshape(self.groups(n), self.rows * h)

    def ungroup(self, values: np.ndarray, n: int) -> np.ndarray:
        """groups x (k*h) values back to the first n of groups*k rows of h."""
        return np.asarray(values).reshape(-1, self.width)[:n]


def shift(rows: list[list[mpz]], bits: int, nsquare: mpz, threads: int) -> list[list[mpz]]:
    """[[M * 2^bits]] from [[M]]: every ciphertext raised to 2^bits (GIL-free, threads)."""
    if not rows:
        return []
    cols = len(rows[0])
    flat = [c for row in rows for c in row]
    shifted = parallel_powmod(flat, mpz(1) << bits, nsquare, threads)
    return [shifted[i : i + cols] for i in range(0, len(shifted), cols)]


class ShiftedCopies:
    """[[M]], [[M << 1 row]], ..., [[M << k-1 rows]] of a ciphertext matrix under one key.

    Copy 0 is the caller's own list of rows (updated in place), so a holder of [[M]]
    and this object always agree.
    """

    def __init__(
        self, rows: list[list[mpz]], layout: RowLayout, nsquare: mpz, threads: int
    ) -> None:
        self._layout, self._nsquare, self._threads = layout, nsquare, threads
        self.copies = [rows]
        for _ in range(1, layout.rows):
            self.copies.append(shift(self.copies[-1], layout.shift_bits, nsquare, threads))

    def stacked(self) -> list[list[mpz]]:
        """All copies, copy 0 first: the bases of a grouped product."""
        return [row for copy in self.copies for row in copy]

    def product(self, matmul: CipherMatmul, exps: sp.csr_matrix, cols: int) -> list[list[mpz]]:
        """[[X M]] with the rows of X (N x d exponents) packed k to a ciphertext."""
        grouped = self._layout.group_exponents(exps)
        return matmul.matmul(grouped, self.stacked(), self._nsquare, cols)

    def add(self, indices: list[int], deltas: list[list[mpz]]) -> None:
        """Row indices[i] of M += deltas[i] (ciphertexts), in every copy."""
        nsq = self._nsquare
        for t, copy in enumerate(self.copies):
            if t:
                deltas = shift(deltas, self._layout.shift_bits, nsq, self._threads)
            add_at(copy, indices, deltas, nsq)


class HornerRows:
    """[[M]] kept unshifted; packed products fold each group's rows by Horner's rule.

    Same interface as `ShiftedCopies` (`product`, `add`); `rows` is the caller's list.
    """

    def __init__(
        self, rows: list[list[mpz]], layout: RowLayout, nsquare: mpz, threads: int
    ) -> None:
        self._layout, self._nsquare, self._threads = layout, nsquare, threads
        self.rows = rows

    def product(self, matmul: CipherMatmul, exps: sp.csr_matrix, cols: int) -> list[list[mpz]]:
        """[[X M]] with the rows of X packed k to a ciphertext."""
        per_row = matmul.matmul(exps, self.rows, self._nsquare, cols)
        return horner(per_row, self._layout, self._nsquare, self._threads)

    def add(self, indices: list[int], deltas: list[list[mpz]]) -> None:
        """Row indices[i] of M += deltas[i] (ciphertexts)."""
        add_at(self.rows, indices, deltas, self._nsquare)


def add_at(
    rows: list[list[mpz]], indices: list[int], deltas: list[list[mpz]], nsquare: mpz
) -> None:
    """rows[indices[i]] += deltas[i] homomorphically, in place."""
    for j, delta in zip(indices, deltas, strict=True):
        rows[j] = [a * b % nsquare for a, b in zip(rows[j], delta, strict=True)]


def horner(rows: list[list[mpz]], layout: RowLayout, nsquare: mpz, threads: int) -> list[list[mpz]]:
    """Group g = [[sum_t row_{g*k+t} << t rows]] from per-row ciphertexts: k - 1 rounds of
    (shift every group's accumulator by one row, multiply in its next lower row); the
    shifts of a round run GIL-free over `threads`."""
    k, n = layout.rows, len(rows)
    if k == 1 or not rows:
        return rows
    one = [mpz(1)] * len(rows[0])
    padded = rows + [one] * (layout.groups(n) * k - n)
    acc = [list(padded[g * k + k - 1]) for g in range(layout.groups(n))]
    for t in range(k - 2, -1, -1):
        acc = shift(acc, layout.shift_bits, nsquare, threads)
        acc = [
            [a * b % nsquare for a, b in zip(group, padded[g * k + t], strict=True)]
            for g, group in enumerate(acc)
        ]
    return acc


def packed_products(
    rows: list[list[mpz]], layout: RowLayout, in_dim: int, nsquare: mpz, threads: int
) -> ShiftedCopies | HornerRows:
    """The cheaper holder for an *updated* matrix of `in_dim` rows: copies cost
    in_dim * (k - 1) shifts per update, Horner about REFERENCE_BATCH * (k - 1) / k per
    product."""
    if in_dim * layout.rows > REFERENCE_BATCH:
        return HornerRows(rows, layout, nsquare, threads)
    return ShiftedCopies(rows, layout, nsquare, threads)
