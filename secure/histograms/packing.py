"""Bucket sums on their way back: packed and re-randomised (passive), decrypted (active).

`pack` puts `layout.per_cipher` bucket parts in one ciphertext by shift-and-add (Horner:
Q = P_0 + 2^u (P_1 + 2^u (P_2 + ...)), u = `layout.unit_bits` squarings per part), in an
optional order (a shuffle), then multiplies every packed ciphertext by a fresh H^r that
is within 2^-80 of uniform in <H> (`secure.ou.cipher.Rerandomizer`). Without it the key's
owner, who keeps the randomness of the rows it encrypted, could tell which rows each
bucket summed (a subset-sum over its own r values); with it a packed ciphertext shows the
owner nothing but its plaintext. `decrypt` reads the sums back as a (buckets, k) array,
in the packed order, and refuses plaintexts that no packing of this layout can give.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from gmpy2 import mpz
from vfl.secure.errors import InputError, OuKeyError
from vfl.secure.executor.base import OU_DECRYPT, OU_PRODUCT, BlockExecutor
from vfl.secure.histograms.blocks import (
    PackTable,
    decrypt_block,
    pack_block,
    plaintexts,
)
from vfl.secure.histograms.buckets import EncryptedBuckets
from vfl.secure.histograms.layout import Layout
from vfl.secure.ou.cipher import decrypt as ou_decrypt, rerandomizer_products
from vfl.secure.ou.keys import OuPrivateKey, OuPublicKey
from vfl.secure.paillier.blocks import blob, unblob
from vfl.secure.paillier.counters import OpCounts


@dataclass(frozen=True)
class PackedBuckets:
    """`buckets` bucket sums packed `layout.per_cipher` parts to a ciphertext."""

    key: OuPublicKey
    layout: Layout
    buckets: int
    ciphertexts: list[mpz]

    def __post_init__(self) -> None:
        """Raises:
        InputError: not `layout.packed_count(buckets)` ciphertexts.
        """
        if len(self.ciphertexts) != self.layout.packed_count(self.buckets):
            raise InputError(
                f"{len(self.ciphertexts)} packed ciphertexts for {self.buckets} buckets; "
                f"this layout packs them in {self.layout.packed_count(self.buckets)}"
            )

    @property
    def nbytes(self) -> int:
        return len(self.ciphertexts) * self.key.width


def pack(
    buckets: EncryptedBuckets,
    order: np.ndarray | Sequence[int] | None = None,
    executor: BlockExecutor | None = None,
    counts: OpCounts | None = None,
) -> PackedBuckets:
    """The buckets at positions `order` (in that order: a shuffle, or the candidates'
    buckets of cumulative sums; None: all, as they are) packed and re-randomised for
    the key's owner.

    Raises:
        InputError: `order` is not a 1-D sequence of bucket positions.
    """
    layout, key, parts = buckets.layout, buckets.key, buckets.layout.parts
    units = _ordered(buckets, order)
    table = PackTable(key, layout)
    per = layout.per_cipher
    groups = -(-len(units) // per)
    per_group = per * (layout.unit_bits + 1) + rerandomizer_products(key)
    wanted = executor.block_items(OU_PRODUCT, key.bits) if executor is not None else 1
    per_task = max(1, -(-wanted // per_group))
    if executor is not None and groups >= 2 * per_task:
        spans = executor.split(groups, per_task)
        blocks = [blob(units[lo * per : hi * per], key.width) for lo, hi in spans]
        results = executor.map(pack_block, executor.share(table), blocks)
    else:
        results = [pack_block(table, blob(units, key.width))]
    if counts is not None:  # (units - groups) shifts of unit_bits squarings and a product
        counts.add(products=(len(units) - groups) * (layout.unit_bits + 1), rerandomizations=groups)
    packed = [c for result in results for c in unblob(result, key.width)]
    return PackedBuckets(key, layout, len(units) // parts, packed)


def decrypt(
    packed: PackedBuckets,
    key: OuPrivateKey,
    *,
    scaled: bool = True,
    threads: int = 2,
    executor: BlockExecutor | None = None,
    counts: OpCounts | None = None,
) -> np.ndarray:
    """The bucket sums, (buckets, k), in the packed order: reals (`scaled`) or the exact
    int64 sums at scale 2^f. Decryptions run in `threads` threads, or on the executor
    when it takes them (`spreads_paillier`: a cluster) and they are two tasks' worth.

    Raises:
        OuKeyError: `key` is not the private key of the buckets' key.
        PayloadError: a plaintext that no packing of bucket sums in this layout can give
            (a malformed or forged histogram).
    """
    if key.public_key != packed.key:
        raise OuKeyError(
            f"these buckets are under the key of '{packed.key.owner}', not the given one"
        )
    layout, width = packed.layout, packed.key.width
    cts = packed.ciphertexts
    per_task = executor.block_items(OU_DECRYPT, packed.key.bits) if executor is not None else 1
    if executor is not None and executor.spreads_paillier and len(cts) >= 2 * per_task:
        spans = executor.split(len(cts), per_task)
        results = executor.map(
            decrypt_block, executor.share(key), [blob(cts[lo:hi], width) for lo, hi in spans]
        )
        values = [v for result in results for v in plaintexts(result, width)]
    else:
        values = ou_decrypt(key, cts, threads)
    if counts is not None:
        counts.add(decryptions=len(cts))
    sums = layout.decode(values, packed.buckets * layout.parts)
    return sums * 2.0**-layout.scale_bits if scaled else sums


def _ordered(buckets: EncryptedBuckets, order: np.ndarray | Sequence[int] | None) -> list[mpz]:
    """The parts of the buckets at positions `order` (bucket-major)."""
    if order is None:
        return list(buckets.ciphertexts)
    positions = np.asarray(order)
    total, parts = buckets.total, buckets.layout.parts
    if positions.ndim != 1 or (positions.size and not np.issubdtype(positions.dtype, np.integer)):
        raise InputError("order must be a 1-D sequence of bucket positions")
    if positions.size and (positions.min() < 0 or positions.max() >= total):
        raise InputError(f"a bucket position in order lies outside [0, {total})")
    cts = buckets.ciphertexts
    return [cts[b * parts + j] for b in positions.tolist() for j in range(parts)]
