"""Okamoto-Uchiyama encryption, decryption and re-randomisation over gmpy2 integers.

- The owner encrypts by CRT (`OwnerEncryptor`), knowing the structure of the groups
  (`secure.ou.keys`): modulo p^2 a ciphertext of m is (1 + p (m kappa mod p)) H^(r_p), the
  C_p element G^m has, times a uniform element of C_t (r_p uniform mod t, from a
  fixed-base table of H mod p^2 with 11-bit digits: 21 products at 2048 bits); modulo q
  it is x^2 for a uniform x, a uniform quadratic residue. That is exactly the distribution
  of G^m H^r for a uniform r, so the owner's encryptions need no assumption beyond the
  scheme's (no short exponent), at about 23 products mod p^2 (1366 bits at 2048), against
  2 x 127 mod p^2 and q^2 (2048 bits) for a Paillier short-exponent encryption.
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
import numpy as np
from gmpy2 import mpz
from vfl.secure.errors import EncodingError, PayloadError
from vfl.secure.ou.keys import OuPrivateKey, OuPublicKey
from vfl.secure.paillier.fixed_base import ProductTable
from vfl.secure.paillier.short_exponent import power_rows

STAT_BITS = 80  # statistical distance 2^-80 of a re-randomiser from uniform in <H>
STAT_RANDOM_BITS = 128  # the owner's random exponents: within 2^-128 of uniform
OWNER_WINDOW = 11  # bits per digit of the owner's table: 21 products, ~9 MB at 2048 bits
_DIGIT_BITS = 8


def _rows(bits: int, window: int = _DIGIT_BITS) -> int:
    return max(1, -(-bits // window))


class WindowTable:
    """base^e mod m for e < 2^bits: one product per nonzero `window`-bit digit of e, from
    rows T_i[d] = base^(d 2^(window i)) (2^window values per row)."""

    def __init__(self, base: mpz, bits: int, modulus: mpz, window: int) -> None:
        self._modulus, self._window = mpz(modulus), window
        self._mask = (1 << window) - 1
        self.rows: list[list[mpz]] = []
        power = mpz(base) % self._modulus
        for _ in range(_rows(bits, window)):
            row = [mpz(1), power]
            for _ in range(2, 1 << window):
                row.append(row[-1] * power % self._modulus)
            self.rows.append(row)
            power = row[-1] * power % self._modulus

    def digits(self, exponents: Sequence[int]) -> np.ndarray:
        """The `window`-bit digits of each exponent, least significant first (count x rows)."""
        rows, window = len(self.rows), self._window
        size = -(-rows * window // 8)
        raw = b"".join(int(e).to_bytes(size, "little") for e in exponents)
        bits = np.unpackbits(np.frombuffer(raw, dtype=np.uint8), bitorder="little")
        bits = bits.reshape(len(exponents), size * 8)[:, : rows * window]
        weights = 1 << np.arange(window, dtype=np.int64)
        return bits.reshape(len(exponents), rows, window).astype(np.int64) @ weights

    def power(self, digits: Sequence[int]) -> mpz:
        """base^e mod m for e given by its digits (a row of `digits`)."""
        modulus, rows = self._modulus, self.rows
        acc = rows[0][digits[0]]
        for row, digit in zip(rows[1:], digits[1:], strict=True):
            if digit:
                acc = acc * row[digit] % modulus
        return acc


def uniform_below(bound: int, count: int) -> list[int]:
    """`count` integers within 2^-128 of uniform in [0, bound), from one draw of
    `secrets.token_bytes` (a system call per value would cost more than the value)."""
    size = (bound.bit_length() + STAT_RANDOM_BITS + 7) // 8
    raw = secrets.token_bytes(size * count)
    return [int.from_bytes(raw[i : i + size], "little") % bound for i in range(0, len(raw), size)]


class OwnerEncryptor:
    """The key owner's encryptions of signed plaintexts below 2^(message_bits - 1)."""

    def __init__(self, private: OuPrivateKey, message_bits: int) -> None:
        """Raises:
        EncodingError: `message_bits` beyond the key's signed plaintext range.
        """
        key = private.public_key
        if not 1 <= message_bits <= key.plaintext_bits:
            raise EncodingError(
                f"{message_bits}-bit plaintexts do not fit the {key.plaintext_bits}-bit "
                "plaintexts of the key"
            )
        self._sk = private
        self.message_bits = message_bits
        p2 = private.psquare
        self._h_p = WindowTable(key.h, int(private.t.bit_length()), p2, OWNER_WINDOW)

    @property
    def products(self) -> int:
        """Products per encryption (for cost estimates)."""
        return len(self._h_p.rows) + 4

    def encrypt(self, plaintexts: Sequence[int]) -> list[mpz]:
        """Fresh encryptions of signed integers, each |m| < 2^(message_bits - 1).

        Raises:
            EncodingError: a plaintext out of that range (a caller checks its layout first).
        """
        sk = self._sk
        p, p2, q, kappa = sk.p, sk.psquare, sk.q, sk.kappa
        limit = 1 << (self.message_bits - 1)
        if any(not -limit < m < limit for m in plaintexts):
            raise EncodingError(f"plaintext outside the {self.message_bits}-bit signed range")
        count, table = len(plaintexts), self._h_p
        digits = table.digits(uniform_below(int(sk.t), count)).tolist()  # r_p mod t
        squares = uniform_below(int(q) - 1, count)  # x - 1, x uniform in [1, q)
        out = []
        for m, r, x in zip(plaintexts, digits, squares, strict=True):
            xp = (1 + p * (m * kappa % p)) * table.power(r) % p2
            x = mpz(x + 1)
            out.append(sk.crt(xp, x * x % q))
        return out


@lru_cache(maxsize=2)
def owner_encryptor(private: OuPrivateKey, message_bits: int) -> OwnerEncryptor:
    """The `OwnerEncryptor` of a key, built once per process (about 43,000 products)."""
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
