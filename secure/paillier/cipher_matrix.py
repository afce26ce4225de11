"""`CipherMatrix`: a matrix of packed Paillier ciphertexts under one key.

Its strict wire form is `secure.wire.ciphertexts`.
"""

from __future__ import annotations

from dataclasses import dataclass

from gmpy2 import mpz

from secure.paillier.keys import PublicKey


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
