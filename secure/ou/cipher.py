"""Okamoto-Uchiyama encryption, decryption and re-randomisation over gmpy2 integers.

- The owner encrypts by CRT (`OwnerEncryptor`): c mod p^2 = G^e H^(r_p) and c mod q =
  H^(r_q), with r_p uniform mod t and r_q uniform mod q - 1, from fixed-base tables of 8-bit
  digits (`secure.paillier.fixed_base.ProductTable` over `short_exponent.power_rows`). That
  is exactly the distribution of G^m H^r for a uniform r (H mod q generates the subgroup
  G mod q lies in, and the orders of H mod p^2 and mod q are coprime), so the owner's
  encryptions need no assumption beyond the scheme's: no short exponent. Signed m with
  |m| < 2^(bits - 1) go in as e = m + 2^(bits - 1) with G^(-2^(bits - 1)) folded in. Cost
  at 2048 bits: about 40 products mod p^2 (1366 bits) and 86 mod q (683 bits), against
  2 x 127 mod p^2, q^2 (2048 bits) for a Paillier short-exponent encryption.
- Decryption (`decrypt`): c^t mod p^2 (t of 224 bits) with `gmpy2.powmod_base_list`, which
  releases the GIL, in threads; then m = L(.) L(G^t)^-1 mod p, signed.
- Re-randomisation by a party without the factors (`Rerandomizer`): c H^r with r uniform of
  `randomness_bits` + 80 bits, from a fixed-base table of the public H: H^r is then within
  2^-80 of uniform in <H> (statistical, no assumption), so a re-randomised ciphertext
  shows its owner, who knows the factors, nothing but its plaintext.

Tables are built once per key and process (`owner_encryptor`, `rerandomizer`: small LRU
caches), so the executor's workers build theirs at their first task.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

import gmpy2
from gmpy2 import mpz
from vfl.secure.errors import EncodingError, PayloadError
from vfl.secure.ou.keys import OuPrivateKey, OuPublicKey
from vfl.secure.paillier.fixed_base import ProductTable
from vfl.secure.paillier.short_exponent import power_rows

STAT_BITS = 80  # statistical distance 2^-80 of a re-randomiser from uniform in <H>
_DIGIT_BITS = 8


def _rows(bits: int) -> int:
    return max(1, -(-bits // _DIGIT_BITS))


class OwnerEncryptor:
    """The key owner's encryptions of signed plaintexts below 2^(message_bits - 1)."""

    def __init__(self, private: OuPrivateKey, message_bits: int) -> None:
        key = private.public_key
        self._sk = private
        self.message_bits = message_bits
        p2, q = private.psquare, private.q
        self._e_rows = _rows(message_bits)
        self._t_rows = _rows(int(private.t.bit_length()))
        self._q_rows = _rows(int(q.bit_length()))
        self._g = ProductTable(power_rows(key.g % p2, self._e_rows, p2), p2)
        self._h_p = ProductTable(power_rows(key.h % p2, self._t_rows, p2), p2)
        self._h_q = ProductTable(power_rows(key.h % q, self._q_rows, q), q)
        self._offset = mpz(1) << (message_bits - 1)
        self._unshift = gmpy2.powmod(key.g % p2, -self._offset, p2)  # G^(-offset) mod p^2

    @property
    def products(self) -> int:
        """Products per encryption at most (for cost estimates)."""
        return self._e_rows + self._t_rows + self._q_rows + 2

    def encrypt(self, plaintexts: Sequence[int]) -> list[mpz]:
        """Fresh encryptions of signed integers, each |m| < 2^(message_bits - 1).

        Raises:
            EncodingError: a plaintext out of that range (a caller checks its layout first).
        """
        sk = self._sk
        t, order_q = int(sk.t), int(sk.q) - 1
        e_rows, t_rows, q_rows = self._e_rows, self._t_rows, self._q_rows
        g, h_p, h_q, unshift, p2 = self._g, self._h_p, self._h_q, self._unshift, sk.psquare
        out = []
        for m in plaintexts:
            e = int(m) + int(self._offset)
            if not 0 <= e < 1 << self.message_bits:
                raise EncodingError(f"plaintext outside the {self.message_bits}-bit signed range")
            xp = g.product(e.to_bytes(e_rows, "little")) * unshift % p2
            xp = xp * h_p.product(secrets.randbelow(t).to_bytes(t_rows, "little")) % p2
            xq = h_q.product(secrets.randbelow(order_q).to_bytes(q_rows, "little"))
            out.append(sk.crt(xp, xq))
        return out


@lru_cache(maxsize=2)
def owner_encryptor(private: OuPrivateKey, message_bits: int) -> OwnerEncryptor:
    """The `OwnerEncryptor` of a key, built once per process (about 30,000 products)."""
    return OwnerEncryptor(private, message_bits)


def decrypt(private: OuPrivateKey, ciphertexts: Sequence[mpz], threads: int = 1) -> list[int]:
    """Signed plaintexts in (-p/2, p/2] of ciphertexts under the key of `private`;
    c^t mod p^2 over `threads` threads (the exponentiations release the GIL).

    Raises:
        PayloadError: a value is not of the form G^m H^r (c^t is not 1 mod p): not a
            ciphertext of this key, e.g. a peer's forgery.
    """
    p, p2, t, gp_inv = private.p, private.psquare, private.t, private.gp_inv
    reduced = [mpz(c) % p2 for c in ciphertexts]
    parts = max(1, min(threads, len(reduced) // 16))
    if parts == 1:
        powers = gmpy2.powmod_base_list(reduced, t, p2)
    else:
        step = -(-len(reduced) // parts)
        chunks = [reduced[i : i + step] for i in range(0, len(reduced), step)]
        with ThreadPoolExecutor(len(chunks)) as pool:
            done = pool.map(lambda chunk: gmpy2.powmod_base_list(chunk, t, p2), chunks)
            powers = [x for part in done for x in part]
    half = p // 2
    out = []
    for x in powers:
        quotient, remainder = gmpy2.f_divmod(x - 1, p)
        if remainder:
            raise PayloadError(
                f"a value is not a ciphertext under the key of '{private.public_key.owner}'"
            )
        m = quotient * gp_inv % p
        out.append(int(m - p) if m > half else int(m))
    return out


def rerandomizer_products(public: OuPublicKey) -> int:
    """Products mod n per re-randomisation (one per 8 bits of r)."""
    return _rows(public.randomness_bits + STAT_BITS)


class Rerandomizer:
    """c H^r mod n with r uniform of `randomness_bits` + 80 bits, for any party."""

    def __init__(self, public: OuPublicKey) -> None:
        self.key = public
        self._rows = rerandomizer_products(public)
        self._table = ProductTable(power_rows(public.h, self._rows, public.n), public.n)

    @property
    def products(self) -> int:
        """Products per re-randomisation (for cost estimates)."""
        return self._rows

    def apply(self, ciphertexts: Sequence[mpz]) -> list[mpz]:
        n, table, rows = self.key.n, self._table, self._rows
        return [c * table.product(secrets.token_bytes(rows)) % n for c in ciphertexts]


@lru_cache(maxsize=4)
def rerandomizer(public: OuPublicKey) -> Rerandomizer:
    """The `Rerandomizer` of a key, built once per process (about 32,000 products)."""
    return Rerandomizer(public)


def shift(c: mpz, bits: int, n: mpz) -> mpz:
    """[[x 2^bits]]: `bits` squarings."""
    power: mpz = gmpy2.powmod(c, mpz(1) << bits, n)
    return power
