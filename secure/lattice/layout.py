"""Coefficient layouts of the MatMul source layer's products (Cheetah-style).

Matrices sit in polynomial coefficients, not SIMD slots, so one plaintext x ciphertext
product in Z_t[x]/(x^N + 1) gives a block of inner products at known coefficients, with
no rotation and no Galois key (Huang et al., Cheetah, USENIX Security 2022). A weight
matrix W (d x h) is cut into blocks of `width` = d_c features; block b is the polynomial

    W_b(x)  = sum_{j<d_c, k<h} W[b d_c + j, k] x^(k d_c + d_c - 1 - j)   (support: [0, d_c h))

Forward, Z = X W for rows in groups of `rows_forward` = floor((N - d_c + 1) / (d_c h)):

    X_gb(x) = sum_{i, j} X[g r + i, b d_c + j] x^(i d_c h + j)
    Z[g r + i, k] is coefficient i d_c h + k d_c + d_c - 1 of sum_b X_gb W_b

(degree below N: no wrap-around). Backward, dW = X^T G for rows in blocks of
`rows_backward` = floor(N / (d_c h)), with a = d_c h:

    G_r(x)   = sum_{i, k} G[r s + i, k] x^(k d_c + i a)
    X'_rb(x) = sum_{i, j} X[r s + i, b d_c + j] x^(d_c - 1 - j - i a)   (x^-m = -x^(N-m))
    dW_b     = sum_r X'_rb G_r   on the support of W_b

The terms of unequal rows land outside the support, at i' a - i a + [0, a) for i' != i
(negative offsets wrap to [N - (s - 1) a, N)), so the support holds exactly the block of
dW, but the other coefficients of the updated [[W_b]] are not zero: its owner refreshes
it (the layer's `vr`/`vc` messages) before the next forward product reads it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from vfl.secure.errors import ConfigError

# Relative costs per operation for choosing the block width, measured with SEAL at
# N = 8192 (bench/secure_step.py --bfv prints them): a plaintext product; an output that
# crosses back (encryption of zero, flooding, modulus switch, bytes, decryption); a fresh
# encryption (bytes included); a refresh of one block (one of each of the last two).
COST_PRODUCT, COST_OUTPUT, COST_FRESH = 1.0, 3.0, 2.0


@dataclass(frozen=True)
class BlockLayout:
    """The layout of one party's weights (d x h) and its products, for ring degree n."""

    degree: int
    d: int
    h: int
    width: int  # d_c, features per block

    @property
    def blocks(self) -> int:
        return -(-self.d // self.width)

    @property
    def support(self) -> int:
        return self.width * self.h

    @property
    def rows_forward(self) -> int:
        return (self.degree - self.width + 1) // self.support

    @property
    def rows_backward(self) -> int:
        return self.degree // self.support

    def groups(self, rows: int) -> int:
        """Ciphertexts of a forward product over `rows` rows."""
        return -(-rows // self.rows_forward)

    def row_blocks(self, rows: int) -> int:
        """Ciphertexts of G (m3) for `rows` rows."""
        return -(-rows // self.rows_backward)

    # weights ------------------------------------------------------------------------

    def _weight_positions(self) -> np.ndarray:
        j, k = np.meshgrid(np.arange(self.width), np.arange(self.h), indexing="ij")
        return k * self.width + self.width - 1 - j  # (d_c, h)

    def weights(self, w: np.ndarray) -> np.ndarray:
        """W (d x h, int64) as `blocks` polynomials (blocks x N)."""
        padded = np.zeros((self.blocks * self.width, self.h), dtype=np.int64)
        padded[: self.d] = w
        out = np.zeros((self.blocks, self.degree), dtype=np.int64)
        out[:, self._weight_positions()] = padded.reshape(self.blocks, self.width, self.h)
        return out

    def weights_support(self, polys: np.ndarray) -> np.ndarray:
        """The polynomials' coefficients on the weight support, zero elsewhere."""
        out = np.zeros_like(polys)
        out[:, : self.support] = polys[:, : self.support]
        return out

    def read_weights(self, polys: np.ndarray) -> np.ndarray:
        """W (d x h) from its block polynomials (the inverse of `weights`)."""
        w = polys[:, self._weight_positions()].reshape(self.blocks * self.width, self.h)
        return w[: self.d]

    # forward ------------------------------------------------------------------------

    def _rows(self, x: np.ndarray, per: int) -> np.ndarray:
        """x (n x d) zero-padded to whole groups of `per` rows and whole blocks:
        (groups, blocks, per, d_c)."""
        n = x.shape[0]
        groups = -(-n // per)
        padded = np.zeros((groups * per, self.blocks * self.width), dtype=np.int64)
        padded[:n, : self.d] = x
        return padded.reshape(groups, per, self.blocks, self.width).transpose(0, 2, 1, 3)

    def forward_plain(self, x: np.ndarray) -> np.ndarray:
        """X (n x d, int64) as plaintexts (groups x blocks x N)."""
        r = self.rows_forward
        i, j = np.meshgrid(np.arange(r), np.arange(self.width), indexing="ij")
        rows = self._rows(x, r)
        out = np.zeros(rows.shape[:2] + (self.degree,), dtype=np.int64)
        out[:, :, i * self.support + j] = rows
        return out

    def _output_positions(self) -> np.ndarray:
        i, k = np.meshgrid(np.arange(self.rows_forward), np.arange(self.h), indexing="ij")
        return i * self.support + k * self.width + self.width - 1  # (rows, h)

    def read_output(self, polys: np.ndarray, n: int) -> np.ndarray:
        """Z (n x h) from the forward product's polynomials (groups x N)."""
        z = polys[:, self._output_positions()].reshape(-1, self.h)
        return z[:n]

    def place_output(self, z: np.ndarray, fill: np.ndarray) -> np.ndarray:
        """`fill` (groups x N) with Z (n x h) written at the output coefficients."""
        out = fill.copy()
        groups, r = fill.shape[0], self.rows_forward
        padded = np.zeros((groups * r, self.h), dtype=fill.dtype)
        padded[: z.shape[0]] = z
        out[:, self._output_positions()] = padded.reshape(groups, r, self.h)
        return out

    # backward -----------------------------------------------------------------------

    def grad_polys(self, g: np.ndarray) -> np.ndarray:
        """G (n x h, int64) as `row_blocks` polynomials (m3)."""
        s = self.rows_backward
        n = g.shape[0]
        blocks = -(-n // s)
        padded = np.zeros((blocks * s, self.h), dtype=np.int64)
        padded[:n] = g
        i, k = np.meshgrid(np.arange(s), np.arange(self.h), indexing="ij")
        out = np.zeros((blocks, self.degree), dtype=np.int64)
        out[:, k * self.width + i * self.support] = padded.reshape(blocks, s, self.h)
        return out

    def backward_plain(self, x: np.ndarray) -> np.ndarray:
        """X (n x d, int64) as the plaintexts of X^T G (row blocks x blocks x N)."""
        s = self.rows_backward
        i, j = np.meshgrid(np.arange(s), np.arange(self.width), indexing="ij")
        exponent = self.width - 1 - j - i * self.support
        sign = np.where(exponent >= 0, 1, -1)
        rows = self._rows(x, s)
        out = np.zeros(rows.shape[:2] + (self.degree,), dtype=np.int64)
        out[:, :, exponent % self.degree] = rows * sign
        return out


def costs(degree: int, d: int, h: int, rows: int, width: int, refreshed: bool) -> float:
    """Relative cost of one step with block width `width` (see the COST_ constants):
    forward products and outputs, and for refreshed weights (a passive party's share,
    which the backward updates) the backward's products, G's ciphertexts and a refresh
    per block."""
    lay = BlockLayout(degree, d, h, width)
    groups, blocks = lay.groups(rows), lay.blocks
    cost = groups * (blocks * COST_PRODUCT + COST_OUTPUT)
    if refreshed:
        row_blocks = lay.row_blocks(rows)
        cost += row_blocks * (blocks * COST_PRODUCT + COST_FRESH)
        cost += blocks * (COST_OUTPUT + COST_FRESH)
    return cost


def choose_layout(degree: int, d: int, h: int, rows: int, refreshed: bool) -> BlockLayout:
    """The block width of least `costs` for batches of `rows` rows (ties: the wider).

    Raises:
        ConfigError: h does not fit the ring (h > N / 2).
    """
    widths = [w for w in range(1, d + 1) if w * h + w - 1 <= degree]
    if not widths:
        raise ConfigError(
            f"{h} outputs do not fit a ring of degree {degree}; use a smaller "
            "model.source.out_dim with crypto.scheme: bfv"
        )
    best = min(widths, key=lambda w: (costs(degree, d, h, rows, w, refreshed), -w))
    return BlockLayout(degree, d, h, best)
