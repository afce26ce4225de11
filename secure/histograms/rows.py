"""The active party's side: rows of k values encrypted, one ciphertext per row part.

`encrypt_rows` encodes each row by the `Layout` and encrypts it under the owner's own key
with fresh, uniform randomness (`secure.ou.cipher.OwnerEncryptor`); the rows are cut into
blocks for the party's executor when there are at least two tasks' worth
(`compute.min_task_ms` through the cost model's `OU_ENCRYPT`), so the encryption of N rows
uses every core (the table products hold the GIL: threads would not).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from vfl.secure.errors import InputError
from vfl.secure.executor.base import OU_ENCRYPT, BlockExecutor
from vfl.secure.histograms.blocks import EncryptTable, encrypt_block
from vfl.secure.histograms.layout import Layout
from vfl.secure.ou.keys import OuPrivateKey, OuPublicKey
from vfl.secure.paillier.counters import OpCounts


@dataclass(frozen=True)
class EncryptedRows:
    """`count` rows under `key`, each `layout.parts` ciphertexts: `data` holds them as
    fixed-width big-endian integers, shape (count, parts, key.width), read-only."""

    key: OuPublicKey
    layout: Layout
    data: np.ndarray

    def __post_init__(self) -> None:
        """Raises:
        InputError: `data` is not a (rows, parts, width) uint8 array of this key and
            layout, or holds more rows than the layout.
        """
        shape = (self.layout.parts, self.key.width)
        data = self.data
        if data.dtype != np.uint8 or data.ndim != 3 or data.shape[1:] != shape:
            raise InputError(
                f"row ciphertexts must be a (rows, {shape[0]}, {shape[1]}) uint8 array"
            )
        if data.shape[0] > self.layout.rows:
            raise InputError(f"{data.shape[0]} rows, more than the layout's {self.layout.rows}")
        if self.key.plaintext_bits != self.layout.capacity:
            raise InputError("the layout was made for another key size")
        if data.flags.writeable:
            data = data.copy()
            data.flags.writeable = False
            object.__setattr__(self, "data", data)

    @property
    def count(self) -> int:
        return int(self.data.shape[0])

    @property
    def nbytes(self) -> int:
        return int(self.data.nbytes)


def encrypt_rows(
    values: np.ndarray,
    key: OuPrivateKey,
    layout: Layout,
    executor: BlockExecutor | None = None,
    counts: OpCounts | None = None,
) -> EncryptedRows:
    """Encrypt rows of k reals (rows x k, |x| within the layout's bound) under the
    owner's key.

    Raises:
        InputError: not a (rows, k) array, more rows than the layout, or a layout made
            for another key size.
        EncodingError: a NaN, an infinity, or a value beyond the layout's bound.
    """
    array = np.asarray(values, dtype=np.float64)
    public = key.public_key
    if public.plaintext_bits != layout.capacity:
        raise InputError("the layout was made for another key size")
    layout.scaled(array)  # every check before any work
    rows = array.shape[0]
    table = EncryptTable(key, layout)
    per_task = _per_task(executor, layout, public.bits)
    if executor is not None and rows >= 2 * per_task:
        spans = executor.split(rows, per_task)
        results = executor.map(
            encrypt_block, executor.share(table), [array[lo:hi] for lo, hi in spans]
        )
        blob = b"".join(results)
    else:
        blob = encrypt_block(table, array)
    if counts is not None:
        counts.add(encryptions=rows * layout.parts)
    data = np.frombuffer(blob, dtype=np.uint8).reshape(rows, layout.parts, public.width)
    return EncryptedRows(public, layout, data)


def _per_task(executor: BlockExecutor | None, layout: Layout, bits: int) -> int:
    """The fewest rows one encryption task gets."""
    if executor is None:
        return 1
    return max(1, -(-executor.block_items(OU_ENCRYPT, bits) // layout.parts))
