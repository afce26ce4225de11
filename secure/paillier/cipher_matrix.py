"""`CipherMatrix`: a matrix of packed Paillier ciphertexts under one key, and the blob
form of ciphertext rows (fixed-width big-endian integers, row-major) shared by the wire
(`secure.wire.ciphertexts`) and layer checkpoints (`secure.source_layers.state`).
"""

from __future__ import annotations

from dataclasses import dataclass

from gmpy2 import mpz
from vfl.secure.paillier.keys import PublicKey


@dataclass(frozen=True)
class CipherMatrix:
    """rows x cols ciphertexts under `key`; each packs `slots` values at 2^scale_bits."""

    rows: list[list[mpz]]
    cols: int
    key: PublicKey
    slots: int
    scale_bits: int

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.rows), self.cols)

    @property
    def key_owner(self) -> str:
        return self.key.owner


def join_blob(rows: list[list[mpz]], key: PublicKey) -> bytes:
    """Ciphertext rows as one blob of `key.width`-byte big-endian integers, row-major."""
    width = key.width
    return b"".join(c.to_bytes(width, "big") for row in rows for c in row)


def split_blob(blob: bytes, key: PublicKey, cols: int) -> list[list[mpz]] | None:
    """The rows of `cols` ciphertexts in a `join_blob` blob, or None if the blob does not
    split into whole rows or holds a value outside [1, n^2) (the caller names the error)."""
    width, nsquare = key.width, key.nsquare
    if cols < 1 or len(blob) % (width * cols):
        return None
    values = [mpz.from_bytes(blob[i : i + width], "big") for i in range(0, len(blob), width)]
    if any(not 0 < c < nsquare for c in values):
        return None
    return [values[r : r + cols] for r in range(0, len(values), cols)]
