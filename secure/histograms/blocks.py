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
from vfl.secure.histograms.plan import column_groups
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
    ciphertexts (rows x parts x width bytes), the bin codes (rows x columns), the bins of
    each column and the modulus."""

    rows: np.ndarray
    codes: np.ndarray
    counts: tuple[int, ...]
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
    partial sums, bucket-major (an empty one is 1, an encryption of 0). Columns are summed
    alone or in pairs (`secure.histograms.plan`)."""
    n = mpz(table.modulus)
    _, parts, width = table.rows.shape
    cts = unblob(np.ascontiguousarray(table.rows[select]).tobytes(), width)
    by_part = [cts[part::parts] for part in range(parts)]
    codes = table.codes[select]  # its small unsigned type: converted a column at a time
    counts = table.counts
    offsets = [0, *np.cumsum(counts).tolist()]
    acc = [ONE] * (offsets[-1] * parts)
    for group in column_groups(len(select), counts):
        for part, part_cts in enumerate(by_part):
            if len(group) == 1:
                column = group[0]
                ids = (
                    (codes[:, column].astype(np.int64) + offsets[column]) * parts + part
                ).tolist()
                _accumulate(acc, part_cts, ids, n)
            else:
                _pair(acc, part_cts, codes, group, offsets, parts, part, counts, n)
    return blob(acc, width)


def _accumulate(acc: list[mpz], cts: list[mpz], ids: list[int], n: mpz) -> None:
    """acc[k] *= c for each ciphertext c and its bucket k (mod n)."""
    for c, k in zip(cts, ids, strict=True):
        acc[k] = acc[k] * c % n


def _pair(
    acc: list[mpz],
    cts: list[mpz],
    codes: np.ndarray,
    group: tuple[int, ...],
    offsets: list[int],
    parts: int,
    part: int,
    counts: tuple[int, ...],
    n: mpz,
) -> None:
    """Two columns' sums from their joint buckets' (one pass over the rows)."""
    left, right = group
    width = counts[right]
    joint = [ONE] * (counts[left] * width)
    pair = codes[:, left].astype(np.int64) * width + codes[:, right]
    _accumulate(joint, cts, pair.tolist(), n)
    for index, value in enumerate(joint):
        if value is not ONE:
            a = (offsets[left] + index // width) * parts + part
            b = (offsets[right] + index % width) * parts + part
            acc[a] = acc[a] * value % n
            acc[b] = acc[b] * value % n


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
