"""The heavy Paillier work as functions of (shared, block), for any `secure.executor`.

Each function here is one task: `shared` is what the executor sent once (a private key,
a modulus), `block` is one block of rows, and the result is bytes. Ciphertexts cross
the executor as the fixed-width big-endian blobs the protocols already send
(`blob`/`unblob`, width = bytes of n^2), plaintexts as fixed-width signed integers; a
missing partial product is the all-zero value, never a valid ciphertext. The functions
are module-level so that worker processes (local or on a Ray node) import them by name.

    decrypt_block        (PrivateKey, ciphertext blob)        -> signed plaintexts blob
    rerandomize_block    (PublicKey, ciphertext blob)         -> ciphertext blob
    rerandomize_table_block (WorkerTable, ciphertext blob)    -> ciphertext blob
    multiexp_block       (n^2, (bases blob, CSC slices, outputs)) -> two partials blobs
"""

from __future__ import annotations

import os
from typing import NamedTuple

import gmpy2
import numpy as np
from gmpy2 import mpz
from vfl.secure.paillier.fixed_base import times_products
from vfl.secure.paillier.keys import PrivateKey, PublicKey
from vfl.secure.paillier.multiexp import multiexp_columns
from vfl.secure.paillier.multiexp_rows import Partial

# (bases blob, indptr, rows, exponents, outputs) of one block of columns of a product
MultiexpBlock = tuple[bytes, np.ndarray, np.ndarray, np.ndarray, int]


class WorkerTable(NamedTuple):
    """A peer key and its pool's fixed-base power table (`ObfuscatorTable.powers`), shared
    with the party's own workers once per job: secret, like a private key."""

    key: PublicKey
    powers: np.ndarray


def width_of(modulus: mpz) -> int:
    """Bytes of one value below `modulus`."""
    return (int(modulus.bit_length()) + 7) // 8


def blob(values: list[mpz], width: int) -> bytes:
    """Fixed-width big-endian bytes of non-negative values (0 for a missing one)."""
    return b"".join(int(v).to_bytes(width, "big") for v in values)


def int_bytes(value: int | mpz) -> bytes:
    """A non-negative integer as big-endian bytes (at least one)."""
    value = int(value)
    return value.to_bytes((value.bit_length() + 7) // 8 or 1, "big")


def unblob(data: bytes, width: int) -> list[mpz]:
    return [mpz.from_bytes(data[i : i + width], "big") for i in range(0, len(data), width)]


def decrypt_block(key: PrivateKey, ciphertexts: bytes) -> bytes:
    """Decrypt a blob of ciphertexts by CRT; signed plaintexts, each `width_of(n) + 1`
    bytes."""
    n = key.public_key.n
    cts = unblob(ciphertexts, width_of(key.public_key.nsquare))
    mp = gmpy2.powmod_base_list(cts, key.p - 1, key.psquare)
    mq = gmpy2.powmod_base_list(cts, key.q - 1, key.qsquare)
    half, width = n // 2, width_of(n) + 1
    out = []
    for xp, xq in zip(mp, mq, strict=True):
        m_p = gmpy2.divexact(xp - 1, key.p) * key.hp % key.p
        m_q = gmpy2.divexact(xq - 1, key.q) * key.hq % key.q
        m = m_p + key.p * ((m_q - m_p) * key.p_inv_q % key.q)
        out.append(int(m - n if m > half else m).to_bytes(width, "big", signed=True))
    return b"".join(out)


def plaintexts(data: bytes, n: mpz) -> list[int]:
    """The signed plaintexts of `decrypt_block`'s result."""
    width = width_of(n) + 1
    return [
        int.from_bytes(data[i : i + width], "big", signed=True) for i in range(0, len(data), width)
    ]


def rerandomize_block(key: PublicKey, ciphertexts: bytes) -> bytes:
    """Multiply each ciphertext by r^n for a fresh uniform r (one full exponentiation
    each: a worker holds no table; the randomness comes from the worker's os.urandom)."""
    nsq, width = key.nsquare, width_of(key.nsquare)
    cts = unblob(ciphertexts, width)
    size = width_of(key.n) + 8
    rs = [mpz.from_bytes(os.urandom(size), "big") % key.n for _ in cts]
    obfuscators = gmpy2.powmod_base_list(rs, key.n, nsq)
    return blob([c * r % nsq for c, r in zip(cts, obfuscators, strict=True)], width)


def rerandomize_table_block(table: WorkerTable, ciphertexts: bytes) -> bytes:
    """Multiply each ciphertext by a fresh sample of the fixed-base table (~1/6 of a full
    r^n at 2048 bits; same distribution as the pool's own, `secure.paillier.fixed_base`)."""
    nsq = table.key.nsquare
    width = width_of(nsq)
    return blob(times_products(table.powers, nsq, unblob(ciphertexts, width)), width)


def multiexp_block(nsquare: mpz, block: MultiexpBlock) -> bytes:
    """`multiexp_columns` over one block of bases: the positive then the negative partial
    products of every output, 2 x outputs values (0 where an output has no term)."""
    bases, indptr, rows, exponents, n_out = block
    width = width_of(nsquare)
    pos, neg = multiexp_columns(nsquare, unblob(bases, width), indptr, rows, exponents, n_out)
    return blob([mpz(0) if v is None else v for v in [*pos, *neg]], width)


def partials(data: bytes, nsquare: mpz, n_out: int) -> tuple[Partial, Partial]:
    """The (pos, neg) partial products of `multiexp_block`'s result."""
    values: Partial = [None if v == 0 else v for v in unblob(data, width_of(nsquare))]
    return values[:n_out], values[n_out:]
