"""The kernel's heavy work as functions of (shared, block), for any `secure.executor`.

Module-level so that worker processes (local or on a Ray node) import them by name. What
is shared goes once per call site (a key, a tree's row ciphertexts and the bins); blocks
are row positions, values or ciphertext blobs; results are fixed-width big-endian blobs
(`blob`, width = bytes of n).

    encrypt_block   (EncryptTable, values rows x k)          -> row ciphertexts blob
    sum_block       (SumTable, selected row positions)       -> per-bucket partial sums blob
    pack_block      (PackTable, bucket-part ciphertexts blob) -> packed, re-randomised blob
    decrypt_block   (OuPrivateKey, ciphertexts blob)          -> signed plaintexts blob

The owner's encryption tables and the re-randomiser's table are built once per worker
process and key (`secure.ou.cipher`'s caches).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from gmpy2 import mpz
from vfl.secure.histograms.layout import Layout
from vfl.secure.ou.cipher import decrypt, owner_encryptor, rerandomizer, shift
from vfl.secure.ou.keys import OuPrivateKey, OuPublicKey
from vfl.secure.paillier.blocks import blob, unblob

ONE = mpz(1)


class EncryptTable(NamedTuple):
    """What the owner's workers share to encrypt rows: its private key and the layout."""

    key: OuPrivateKey
    layout: Layout


class SumTable(NamedTuple):
    """What a passive party's workers share to sum one tree's buckets: the row
    ciphertexts (rows x parts x width bytes), the bin codes (rows x columns), each
    column's first bucket, the bucket count and the modulus."""

    rows: np.ndarray
    codes: np.ndarray
    offsets: np.ndarray
    buckets: int
    modulus: int


class PackTable(NamedTuple):
    """What a passive party's workers share to pack buckets: the owner's public key (its
    re-randomiser) and the layout."""

    key: OuPublicKey
    layout: Layout


def encrypt_block(table: EncryptTable, values: np.ndarray) -> bytes:
    """Encrypt rows of k reals (encoded by the layout): rows x parts ciphertexts."""
    layout, key = table.layout, table.key
    encryptor = owner_encryptor(key, layout.unit_bits)
    return blob(encryptor.encrypt(layout.encode(values)), key.public_key.width)


def sum_block(table: SumTable, select: np.ndarray) -> bytes:
    """The product per (bucket, part) of the selected rows' ciphertexts: buckets x parts
    partial sums, bucket-major (an empty one is 1, an encryption of 0)."""
    n = mpz(table.modulus)
    _, parts, width = table.rows.shape
    raw = np.ascontiguousarray(table.rows[select]).tobytes()
    cts = unblob(raw, width)
    codes = np.asarray(table.codes[select], dtype=np.int64)
    by_part = [cts[part::parts] for part in range(parts)]
    acc = [ONE] * (table.buckets * parts)
    for column in range(codes.shape[1]):
        base = (codes[:, column] + int(table.offsets[column])) * parts
        for part, column_cts in enumerate(by_part):
            for c, k in zip(column_cts, (base + part).tolist(), strict=True):
                acc[k] = acc[k] * c % n
    return blob(acc, width)


def pack_block(table: PackTable, units: bytes) -> bytes:
    """Pack bucket parts `per_cipher` to a ciphertext (Horner: the first part lowest),
    then re-randomise every packed ciphertext."""
    key, layout = table.key, table.layout
    n, per, bits = key.n, layout.per_cipher, layout.unit_bits
    cts = unblob(units, key.width)
    packed = []
    for start in range(0, len(cts), per):
        group = cts[start : start + per]
        acc = group[-1]
        for c in reversed(group[:-1]):
            acc = shift(acc, bits, n) * c % n
        packed.append(acc)
    return blob(rerandomizer(key).apply(packed), key.width)


def decrypt_block(key: OuPrivateKey, ciphertexts: bytes) -> bytes:
    """Decrypt a blob; signed plaintexts of `width` + 1 bytes each."""
    width = key.public_key.width
    values = decrypt(key, unblob(ciphertexts, width))
    return b"".join(v.to_bytes(width + 1, "big", signed=True) for v in values)


def plaintexts(data: bytes, width: int) -> list[int]:
    """The signed plaintexts of `decrypt_block`'s result under a key of `width` bytes."""
    size = width + 1
    return [
        int.from_bytes(data[i : i + size], "big", signed=True) for i in range(0, len(data), size)
    ]
