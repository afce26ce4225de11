"""What both roles of the Embed-MatMul layer share: input checks, initial shares and
row-wise ciphertext helpers."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from gmpy2 import mpz
from vfl.secure.errors import EncodingError, InputError
from vfl.secure.paillier.cipher_matrix import CipherMatrix
from vfl.secure.paillier.encoding import encode
from vfl.secure.paillier.engine import Paillier
from vfl.secure.source_layers.checks import check_init
from vfl.secure.source_layers.common import InitialShares, flat, shaped


class VocabularyError(InputError):
    """Categorical codes of the wrong shape, or a code outside its field's vocabulary."""


def check_codes(codes: np.ndarray, vocab_sizes: Sequence[int]) -> np.ndarray:
    """Codes (N x F integers, field f in [0, V_f)) as int64.

    Raises:
        VocabularyError: not an N x F integer matrix, or a code outside [0, V_f).
    """
    arr = np.asarray(codes)
    if arr.ndim != 2 or arr.shape[1] != len(vocab_sizes) or arr.shape[0] < 1:
        raise VocabularyError(
            f"codes must be an (N, {len(vocab_sizes)}) integer matrix, got shape {arr.shape}"
        )
    if not np.issubdtype(arr.dtype, np.integer):
        raise VocabularyError(f"codes must be integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    bad = (arr < 0) | (arr >= np.asarray(vocab_sizes, dtype=np.int64))
    if bad.any():
        field = int(np.flatnonzero(bad.any(axis=0))[0])
        raise VocabularyError(
            f"{int(bad.sum())} code(s) lie outside the vocabulary of their field (first: field "
            f"{field}, size {vocab_sizes[field]}); map unseen categories to a reserved code"
        )
    return arr


def initial_tables(
    init: InitialShares,
    name: str,
    vocab_sizes: Sequence[int],
    emb_dim: int,
    rng: np.random.Generator,
) -> list[np.ndarray]:
    """A share of every embedding table: `init[name]` (tests) or N(0, 1/(2k)) entries.

    Raises:
        InputError: `init[name]` is not one finite (V_f x k) array per field.
    """
    given = init.get(name)
    if given is None:
        std = 1.0 / np.sqrt(2.0 * emb_dim)
        return [rng.normal(0.0, std, size=(v, emb_dim)) for v in vocab_sizes]
    if len(given) != len(vocab_sizes):
        raise InputError(f"init['{name}'] must hold one table per field ({len(vocab_sizes)})")
    tables = []
    for table, v in zip(given, vocab_sizes, strict=True):
        checked = check_init({name: table}, name, (v, emb_dim))
        if checked is None:
            raise InputError(f"init['{name}'] holds a missing table")
        tables.append(checked)
    return tables


def encode_table(table: np.ndarray, scale_bits: int, value_bits: int) -> np.ndarray:
    """Fixed-point table entries, checked against the E layout's value bound.

    Raises:
        EncodingError: an entry is too large for an embedding slot at this scale.
    """
    ints = encode(table, scale_bits)
    if ints.size and np.abs(ints).max() >= 1 << (value_bits - 1):
        raise EncodingError(
            f"an embedding share reaches 2^{value_bits - 1 - scale_bits}; shares must stay "
            "below it (rescale the initial tables; the scale is EMBED_SCALES in embed.setup)"
        )
    return ints


def encrypt_rows(he: Paillier, packed: list[list[int]], slots: int, scale: int) -> CipherMatrix:
    """Encrypt rows of packed plaintexts (fresh randomness) under `he`'s key."""
    cols = len(packed[0]) if packed else 1
    cipher = shaped(he.encrypt(flat(packed)), cols) if packed else []
    return CipherMatrix(cipher, cols, he.pk, slots, scale)


def add_plain_rows(he: Paillier, rows: list[list[mpz]], packed: list[list[int]]) -> list[list[mpz]]:
    """[[x]] + m row by row (no fresh randomness)."""
    cols = len(rows[0]) if rows else 1
    return shaped(he.add_plain(flat(rows), flat(packed)), cols) if rows else []


def add_rows(he: Paillier, a: list[list[mpz]], b: list[list[mpz]]) -> list[list[mpz]]:
    """[[x]] + [[y]] row by row."""
    cols = len(a[0]) if a else 1
    return shaped(he.add(flat(a), flat(b)), cols) if a else []


def sealed(he: Paillier, rows: list[list[mpz]], slots: int, scale: int) -> CipherMatrix:
    """Re-randomise rows computed homomorphically, ready to leave this party."""
    cols = len(rows[0]) if rows else 1
    return CipherMatrix(shaped(he.rerandomize(flat(rows)), cols), cols, he.pk, slots, scale)


def negated(values: list[list[int]]) -> list[list[int]]:
    return [[-v for v in row] for row in values]


def decrypt_rows(he: Paillier, matrix: CipherMatrix) -> list[list[int]]:
    """Decrypt a ciphertext matrix to rows of signed packed integers."""
    return shaped(he.decrypt(flat(matrix.rows)), matrix.cols) if matrix.rows else []
