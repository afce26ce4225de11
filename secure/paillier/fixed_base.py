"""Fixed-base tables for Paillier obfuscators: uniform n-th residues at ~1/6 of the cost.

An obfuscator must be a uniformly random n-th residue mod n^2: m1 and m2 are
re-randomised for the party that *owns* the key and decrypts them, and that party knows
p and q, so its view must not depend on how a ciphertext was computed. No computational
assumption can be leaned on against it beyond discrete logarithms mod p (1024 bits for a
2048-bit n, well below 112-bit security), and a single fixed base h (obfuscators h^k)
confines every obfuscator to the cyclic subgroup <h>: the key owner reads the coset of
the computed ciphertext's randomness modulo <h>, e.g. its Legendre symbols mod p and q,
at once. So we keep *statistical* hiding and make it cheap instead (the owner's own fresh
encryptions, which go to the other party, may use one base: `secure.paillier.short_exponent`):

    setup   P independent uniform n-th residues g_1..g_P (P full exponentiations) and
            the tables T_i[d] = g_i^d for d < 2^8 (255 multiplications each);
    sample  prod_i T_i[d_i] with fresh uniform bytes d_1..d_P: P - 1 multiplications.

Security (no assumption): the bases are secret, independent and uniform, and a sample
is h_g(x) = prod_i g_i^(x_i) for uniform bytes x. For x != x', h_g(x) = h_g(x') iff
prod_i g_i^(x_i - x'_i) = 1, which has probability |G[d]| / |G| over g (G[d]: elements
of order dividing d, d = gcd of the byte differences). d > 1 needs all P byte pairs to
agree modulo a prime t (probability <= (1/t + 1/256)^P), and |G[2]| <= 4, so
E|G[d]| <= 1 + 2^(2-P): the family is universal up to that excess, and by the leftover
hash lemma an obfuscator is within (1/2) sqrt(|G| / 2^(8P) + 2^(2-P)) <= 2^-80 of
uniform on the group G of n-th residues once 8P >= log2|G| + 160 and P >= 162. q
obfuscators from one (never revealed) table are within q * 2^-80 of independent ones.

The key owner samples by CRT: the n-th residues mod p^2 form the cyclic group of order
p - 1 (the values s^p mod p^2), so one table mod p^2 and one mod q^2 (2048-bit
products instead of 4096-bit ones), recombined by CRT.

A party's executor (`secure.executor`) may sample from the same table on its own
workers: `ObfuscatorTable.powers()` lays a peer key's table out as one array that is
shipped once per job, and `times_products` multiplies values by samples drawn from it
with fresh digits from the worker's OS CSPRNG. Those samples have the distribution of
the pool's own and count towards the same q (the table is one table wherever it is
read); like the private key, the array may only go to the party's own machines.

Cost at 2048 bits: 276 products mod n^2 versus one 2048-bit exponent (~2450 modular
squarings and products) for r^n; the owner's 2 x 162 products mod p^2, q^2 versus two
1024-bit exponents. Tables: 276 x 256 values of 512 bytes (about 36 MB) for a peer's
key, about 21 MB for our own.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import gmpy2
import numpy as np
from gmpy2 import mpz
from vfl.secure.paillier.keys import PrivateKey, PublicKey

HIDING_BITS = 160  # table entropy above log2|G|: statistical distance <= 2^-80 each
MIN_POSITIONS = 162  # keeps the small-torsion excess 2^(2-P) of the hash below 2^-160
_DIGITS = 256  # one table row per random byte


def positions(group_bits: int) -> int:
    """Table rows (random bytes per obfuscator) for a group of order < 2^group_bits."""
    return max(-(-(group_bits + HIDING_BITS) // 8), MIN_POSITIONS)


def parallel_powmod(bases: Sequence[mpz], exponent: mpz, modulus: mpz, threads: int) -> list[mpz]:
    """[b^exponent mod modulus] with `gmpy2.powmod_base_list` (which releases the GIL)
    split over `threads` threads."""
    bases = list(bases)
    parts = min(threads, max(1, len(bases) // 8))
    if parts <= 1:
        powers: list[mpz] = gmpy2.powmod_base_list(bases, exponent, modulus)
        return powers
    step = -(-len(bases) // parts)
    chunks = [bases[i : i + step] for i in range(0, len(bases), step)]
    with ThreadPoolExecutor(len(chunks)) as executor:
        results = executor.map(
            lambda chunk: gmpy2.powmod_base_list(chunk, exponent, modulus), chunks
        )
        return [value for part in results for value in part]


class ProductTable:
    """Products of one entry per row of independent power tables, modulo `modulus`."""

    def __init__(self, bases: Sequence[mpz], modulus: mpz) -> None:
        """`bases`: independent uniform elements of the group to sample from."""
        self._modulus = mpz(modulus)
        self._rows = [self._powers(mpz(g)) for g in bases]

    def _powers(self, base: mpz) -> list[mpz]:
        row = [mpz(1), base]
        for _ in range(2, _DIGITS):
            row.append(row[-1] * base % self._modulus)
        return row

    @property
    def rows(self) -> int:
        return len(self._rows)

    def sample(self, count: int) -> list[mpz]:
        """`count` fresh products prod_i T_i[d_i], d_i from the OS CSPRNG."""
        return [self.product(secrets.token_bytes(len(self._rows))) for _ in range(count)]

    def powers(self) -> np.ndarray:
        """The table as a read-only uint8 array (rows, 256, width): T_i[d] big-endian,
        width = bytes of the modulus (`times_products` samples from it)."""
        width = (int(self._modulus.bit_length()) + 7) // 8
        data = b"".join(int(v).to_bytes(width, "big") for row in self._rows for v in row)
        return np.frombuffer(data, dtype=np.uint8).reshape(len(self._rows), _DIGITS, width)

    def product(self, digits: bytes) -> mpz:
        """prod_i T_i[digits[i]] (one digit per row)."""
        modulus, rows = self._modulus, self._rows
        acc = rows[0][digits[0]]
        for row, d in zip(rows[1:], digits[1:], strict=True):
            if d:
                acc = acc * row[d] % modulus
        return acc


class ObfuscatorTable:
    """Uniform r^n mod n^2 for one key from product tables (CRT ones for the owner)."""

    def __init__(
        self, public_key: PublicKey, private_key: PrivateKey | None, bases: list[list[mpz]]
    ) -> None:
        """`bases`: the secret uniform elements of each table (`random_bases`); tables
        built from the same bases sample the same distribution (255 P products)."""
        self._sk = private_key
        if private_key is None:
            moduli = [public_key.nsquare]
        else:
            moduli = [private_key.psquare, private_key.qsquare]
        self.bases = bases
        self._tables = [ProductTable(b, m) for b, m in zip(bases, moduli, strict=True)]

    @classmethod
    def generate(
        cls, public_key: PublicKey, private_key: PrivateKey | None, threads: int
    ) -> ObfuscatorTable:
        """New secret tables: P full exponentiations (in threads) and 255 P products."""
        return cls(public_key, private_key, random_bases(public_key, private_key, threads))

    @property
    def multiplications(self) -> int:
        """Products per obfuscator (for cost estimates)."""
        return sum(table.rows - 1 for table in self._tables)

    def powers(self) -> np.ndarray | None:
        """The power table of a peer key's obfuscators as one array (`ProductTable.powers`),
        for `times_products` on the party's own workers; None for the owner's CRT tables.
        Secret: it goes only where the private key may go."""
        return self._tables[0].powers() if self._sk is None else None

    def sample(self, count: int) -> list[mpz]:
        """`count` obfuscators, each within 2^-80 of a uniform n-th residue."""
        if self._sk is None:
            return self._tables[0].sample(count)
        sk = self._sk
        xp, xq = (table.sample(count) for table in self._tables)
        return [sk.crt(a, b) for a, b in zip(xp, xq, strict=True)]


def times_products(powers: np.ndarray, modulus: mpz, values: Sequence[mpz]) -> list[mpz]:
    """[v * prod_i T_i[d_i] mod modulus] for a `ProductTable.powers` array, with fresh
    uniform digits d_i from the OS CSPRNG for each value: each value times one fresh
    sample of the table (what `ProductTable.sample` gives)."""
    rows, digits, width = powers.shape
    flat = np.ascontiguousarray(powers).data.cast("B")
    out = []
    for value in values:
        acc = mpz(value)
        for i, d in enumerate(secrets.token_bytes(rows)):
            if d:
                start = (i * digits + d) * width
                acc = acc * mpz.from_bytes(flat[start : start + width], "big") % modulus
        out.append(acc)
    flat.release()
    return out


def random_bases(
    public_key: PublicKey, private_key: PrivateKey | None, threads: int
) -> list[list[mpz]]:
    """Independent uniform n-th residues mod n^2 (one list), or, for the key owner,
    uniform elements s^p of the order-(p-1) subgroup of (Z/p^2)^* and likewise mod q^2."""
    if private_key is None:
        n = public_key.n
        seeds = [mpz(secrets.randbelow(int(n) - 1) + 1) for _ in range(positions(n.bit_length()))]
        return [parallel_powmod(seeds, n, public_key.nsquare, threads)]
    out = []
    for prime, square in (
        (private_key.p, private_key.psquare),
        (private_key.q, private_key.qsquare),
    ):
        count = positions(int(prime.bit_length()))
        seeds = [mpz(secrets.randbelow(int(prime) - 1) + 1) for _ in range(count)]
        out.append(parallel_powmod(seeds, prime, square, threads))
    return out
