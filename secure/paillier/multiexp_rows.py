"""The row-wise (Straus) multi-exponentiation kernel, for products with few terms per base.

`secure.paillier.multiexp` tabulates every base on its own (a comb): no squarings, but each table
costs about (exponent bits / c) * 2^c products, which only pays when a base serves many
outputs. When bases serve few outputs and outputs have many terms (X^T [[G]]: 256 rows
of [[G]], each used by d_A features), it is cheaper to walk each output's exponents
together, w bits at a time from the top: w squarings of the output's accumulator per
window, shared by all its terms, plus one product per nonzero w-bit digit, with only the
2^w - 1 powers of each base tabulated (Straus's method with fixed windows).

`multiexp_rows` takes and returns exactly what `multiexp.multiexp_columns` does, so the
latter can pick whichever `estimated_cost` says is cheaper.
"""

from __future__ import annotations

import numpy as np
from gmpy2 import mpz

WINDOWS = (1, 2, 3, 4, 5, 6)

Partial = list[mpz | None]  # one entry per output; None means "no term yet"


def window_digits(mags: np.ndarray, w: int) -> np.ndarray:
    """The w-bit digits of each magnitude, least significant first (one row each)."""
    top = int(mags.max()) if mags.size else 0
    count = max(1, -(-top.bit_length() // w))
    shifts = np.arange(count, dtype=np.uint64) * np.uint64(w)
    digits: np.ndarray = (mags[:, None] >> shifts[None, :]) & np.uint64((1 << w) - 1)
    return digits


def estimated_cost(
    indptr: np.ndarray, rows: np.ndarray, exponents: np.ndarray
) -> tuple[float, int]:
    """(modular products, best window) of `multiexp_rows` on this block (CSC form)."""
    if not exponents.size:
        return 0.0, WINDOWS[0]
    mags = np.abs(exponents).astype(np.uint64)
    used = int(np.count_nonzero(np.diff(indptr)))
    groups = len(np.unique(rows * 2 + (exponents < 0)))  # (output, sign) accumulators
    costs = []
    for w in WINDOWS:
        digits = window_digits(mags, w)
        cost = used * ((1 << w) - 2) + groups * w * (digits.shape[1] - 1)
        costs.append((float(cost + int(np.count_nonzero(digits))), w))
    return min(costs, key=lambda cost_and_window: cost_and_window[0])


def multiexp_rows(
    modulus: mpz,
    bases: list[mpz],
    indptr: np.ndarray,
    rows: np.ndarray,
    exponents: np.ndarray,
    n_out: int,
    window: int = 4,
) -> tuple[Partial, Partial]:
    """(pos, neg) per output, as `multiexp.multiexp_columns`, by Straus's method."""
    modulus = mpz(modulus)
    cols = np.repeat(np.arange(len(bases)), np.diff(indptr))
    digits = window_digits(np.abs(exponents).astype(np.uint64), window).astype(np.int64)
    tables = {b: _powers(mpz(bases[b]), window, modulus) for b in np.unique(cols).tolist()}
    order = np.lexsort((cols, rows))
    bounds = np.searchsorted(rows[order], np.arange(n_out + 1))
    signs = np.sign(exponents[order])
    digits, cols = digits[order], cols[order]
    pos: Partial = [None] * n_out
    neg: Partial = [None] * n_out
    for o in range(n_out):
        lo, hi = int(bounds[o]), int(bounds[o + 1])
        for out, mask in ((pos, signs[lo:hi] > 0), (neg, signs[lo:hi] < 0)):
            if mask.any():
                out[o] = _walk(digits[lo:hi][mask], cols[lo:hi][mask], tables, window, modulus)
    return pos, neg


def _powers(base: mpz, w: int, modulus: mpz) -> list[mpz]:
    table = [mpz(1), base]
    for _ in range(2, 1 << w):
        table.append(table[-1] * base % modulus)
    return table


def _walk(
    digits: np.ndarray, cols: np.ndarray, tables: dict[int, list[mpz]], w: int, modulus: mpz
) -> mpz:
    """prod_j base_j^(e_j) for one output, windows from the most significant."""
    acc = None
    nonzero = np.flatnonzero(digits.any(axis=0))
    bases = cols.tolist()
    for k in range(int(nonzero.max()), -1, -1):
        if acc is not None:
            for _ in range(w):
                acc = acc * acc % modulus
        for b, d in zip(bases, digits[:, k].tolist(), strict=True):
            if d:
                t = tables[b][d]
                acc = t if acc is None else acc * t % modulus
    return acc
