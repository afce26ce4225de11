"""The multi-exponentiation kernel: many products of powers of shared bases.

For a sparse exponent matrix E (outputs x bases, given column-wise) it computes
    out_o = prod_b base_b ^ E[o, b]   (mod m)
with a fixed-base comb per base: the powers base^(d * 2^(c*k)) for every digit d of
window k are tabulated once, after which each term costs one multiplication per nonzero
c-bit digit of its exponent, and no squarings. The window width c is chosen per base
from its number of terms, so a base used once degrades gracefully to square-and-multiply
and an exponent of 1 (a binary feature) is a single multiplication: a ciphertext addition.

Terms with negative exponents go to a second accumulator per output; the caller inverts
that one product per output, instead of exponentiating by a huge n - |x|.

When bases serve few outputs and outputs have many terms, the row-wise (Straus) kernel
of `secure.paillier.multiexp_rows` is cheaper; `multiexp_columns` runs whichever of the two an
operation count says is cheaper (same inputs, same result).

Exponents that are all +-1 (binary features, f_X = 0) need no tables at all:
`unit_products` multiplies the bases of each output directly, one product per term.

This module imports only gmpy2, numpy and that kernel: it is what the process pool runs.
"""

from __future__ import annotations

import gmpy2
import numpy as np
from gmpy2 import mpz
from vfl.secure.paillier.multiexp_rows import Partial, estimated_cost, multiexp_rows, window_digits


def _comb_products(terms: int, exp_bits: int, c: int) -> float:
    """Expected modular products of one base's comb of window c: its table, then one
    product per nonzero c-bit digit of `terms` exponents of `exp_bits` bits."""
    windows = -(-exp_bits // c)
    return windows * (c + (1 << c) - 2) + terms * windows * (1 - 2.0**-c)


def _window_bits(terms: int, exp_bits: int) -> int:
    """The comb window c minimising table cost plus per-term cost."""
    return min(range(1, 9), key=lambda c: _comb_products(terms, exp_bits, c))


def _comb_cost(indptr: np.ndarray, exponents: np.ndarray) -> float:
    """Modular products of the per-base comb below on this block (CSC form)."""
    cost = 0.0
    for j in range(len(indptr) - 1):
        lo, hi = int(indptr[j]), int(indptr[j + 1])
        if lo == hi:
            continue
        bits = int(np.abs(exponents[lo:hi]).max()).bit_length()
        cost += _comb_products(hi - lo, bits, _window_bits(hi - lo, bits))
    return cost


def _comb_table(base: mpz, c: int, max_digits: list[int], modulus: mpz) -> list[list[mpz]]:
    """table[k][d] = base^(d * 2^(c*k)) for d = 1..max_digits[k] (index 0 unused)."""
    table: list[list[mpz]] = []
    power = base
    for k, top in enumerate(max_digits):
        if k:
            power = pow(power, 1 << c, modulus)
        row = [mpz(1), power]
        for _ in range(2, top + 1):
            row.append(row[-1] * power % modulus)
        table.append(row)
    return table


def _accumulate(
    acc: Partial, rows: np.ndarray, digits: np.ndarray, table: list[list[mpz]], modulus: mpz
) -> None:
    for r, ds in zip(rows.tolist(), digits.tolist(), strict=True):
        value = acc[r]
        for k, d in enumerate(ds):
            if d:
                t = table[k][d]
                value = t if value is None else value * t % modulus
        acc[r] = value


def product_count(indptr: np.ndarray, rows: np.ndarray, exponents: np.ndarray) -> float:
    """Modular products `multiexp_columns` spends on this block (CSC form): the cheaper of
    the comb and the Straus kernel by their operation counts (for cost accounting)."""
    straus, _ = estimated_cost(indptr, rows, exponents)
    return min(straus, _comb_cost(indptr, exponents))


def multiexp_columns(
    modulus: mpz,
    bases: list[mpz],
    indptr: np.ndarray,
    rows: np.ndarray,
    exponents: np.ndarray,
    n_out: int,
) -> tuple[Partial, Partial]:
    """Products over a block of bases (CSC: column j = base j) for `n_out` outputs.

    Returns:
        (pos, neg): per output, the product of base^e over terms with e > 0, and of
        base^|e| over terms with e < 0; None where an output has no such term.
    """
    modulus = mpz(modulus)
    straus, window = estimated_cost(indptr, rows, exponents)
    if straus < _comb_cost(indptr, exponents):
        return multiexp_rows(modulus, bases, indptr, rows, exponents, n_out, window)
    pos: Partial = [None] * n_out
    neg: Partial = [None] * n_out
    for j, base in enumerate(bases):
        lo, hi = int(indptr[j]), int(indptr[j + 1])
        if lo == hi:
            continue
        exps = exponents[lo:hi]
        mags = np.abs(exps).astype(np.uint64)
        top = int(mags.max())
        if top == 0:
            continue
        c = _window_bits(hi - lo, top.bit_length())
        digits = window_digits(mags, c)
        table = _comb_table(mpz(base), c, digits.max(axis=0).astype(int).tolist(), modulus)
        sign = exps > 0
        _accumulate(pos, rows[lo:hi][sign], digits[sign], table, modulus)
        negative = exps < 0
        if negative.any():
            _accumulate(neg, rows[lo:hi][negative], digits[negative], table, modulus)
    return pos, neg


def unit_products(
    modulus: mpz,
    cipher_rows: list[list[mpz]],
    indptr: np.ndarray,
    indices: np.ndarray,
    signs: np.ndarray,
    n_out: int,
    cols: int,
) -> list[list[mpz]]:
    """[[E @ M]] for E with entries in {-1, 0, 1}, given row-wise (CSR: output o has
    terms indices[indptr[o]:indptr[o+1]] with signs +-1): a product of ciphertexts per
    output and column, one modular inverse per output with negative terms.

    At one multiplication per term this beats any table, and it is too cheap to be
    worth shipping the bases to worker processes.
    """
    modulus = mpz(modulus)
    out: list[list[mpz]] = []
    cols_range = range(cols)
    for o in range(n_out):
        lo, hi = int(indptr[o]), int(indptr[o + 1])
        pos = [mpz(1)] * cols
        neg: list[mpz] | None = None
        for j, s in zip(indices[lo:hi].tolist(), signs[lo:hi].tolist(), strict=True):
            row = cipher_rows[j]
            if s > 0:
                pos = [pos[c] * row[c] % modulus for c in cols_range]
            else:
                neg = list(row) if neg is None else [neg[c] * row[c] % modulus for c in cols_range]
        if neg is not None:
            pos = [pos[c] * gmpy2.invert(neg[c], modulus) % modulus for c in cols_range]
        out.append(pos)
    return out
