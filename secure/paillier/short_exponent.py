"""Short-exponent obfuscators h_s^a (Damgard-Jurik-Nielsen) for the key owner's own fresh
encryptions.

A key from `secure.paillier.keys.generate_keypair` publishes h_s = (-x^2)^n mod n^2 with
n = pq, p = q = 3 (mod 4), gcd(p - 1, q - 1) = 2. Then J_n (the units of Jacobi symbol
1) is cyclic, h = -x^2 generates it or a subgroup of small index, and h_s generates the
n-th powers of that group. An obfuscator is h_s^a with a uniform exponent a of
`exponent_bits(n)` bits instead of a uniform n-th residue: encryption stays semantically
secure under DCR plus the assumption that h_s^a with a short a cannot be told from a
uniform element of <h_s> (Damgard, Jurik, Nielsen, "A generalization of
Paillier's public-key system with applications to electronic voting", IJIS 9(6), 2010;
SecretFlow HEU's ZPaillier and Intel IPCL use it by default, with n.bit_length()/2-bit
exponents). It is a *computational* assumption, so it protects only against a party that
does not know p and q: the owner uses it for the encryptions it makes for the other party
(m3 and the like), never for a re-randomisation of a ciphertext that goes to the owner
(those stay statistical, `secure.paillier.fixed_base`).

Exponent length: n.bit_length() / 2 (as HEU and IPCL) plus `MARGIN_BITS` = 80, so that a
mod (p - 1) and a mod (q - 1) are each within 2^-80 of uniform: each CRT half of an
obfuscator alone is statistically a uniform power of h_s, and only their joint
distribution rests on the assumption. The margin costs the owner nothing: h_s has order
dividing p - 1 mod p^2, so h_s^a = (h_s mod p^2)^(a mod (p - 1)) mod p^2 and the tables
below need only ceil(log2(p) / 8) rows per prime.

The owner computes h_s^a by CRT from fixed-base tables T_i[d] = (h_s mod p^2)^(d 256^i)
and likewise mod q^2 (`ShortExponentTable`: one product per exponent byte, 2 x 127 at
2048 bits against 2 x 161 for the statistical tables; built with 255 products per row,
no exponentiation), or with two exponentiations (`short_exponent_powers`, about the cost
of the statistical "full" method at the owner).
"""

from __future__ import annotations

import secrets
from concurrent.futures import ThreadPoolExecutor

import gmpy2
from gmpy2 import mpz
from vfl.secure.errors import PaillierKeyError
from vfl.secure.paillier.fixed_base import ProductTable
from vfl.secure.paillier.keys import PrivateKey

MARGIN_BITS = 80
_DIGIT_BITS = 8  # one table row per exponent byte (`ProductTable`)
_FULL_PRODUCTS_PER_BIT = 1.2  # a sliding-window powmod: ~1.2 products per exponent bit


def exponent_bits(n_bits: int) -> int:
    """Bits of the uniform exponent a of an obfuscator h_s^a under an n of `n_bits`."""
    return n_bits // 2 + MARGIN_BITS


def power_rows(base: mpz, rows: int, modulus: mpz) -> list[mpz]:
    """[base^(256^i) mod modulus for i < rows]: the bases of a fixed-base table."""
    out = [mpz(base)]
    for _ in range(1, rows):
        out.append(gmpy2.powmod(out[-1], 1 << _DIGIT_BITS, modulus))
    return out


def _base_halves(private: PrivateKey) -> list[tuple[mpz, mpz, mpz]]:
    """(h_s mod p^2, p^2, p - 1) and likewise for q.

    Raises:
        PaillierKeyError: the key has no h_s.
    """
    h_s = private.public_key.h_s
    if h_s is None:
        raise PaillierKeyError(
            f"the key of '{private.public_key.owner}' has no h_s: use statistical obfuscators"
        )
    return [
        (h_s % square, square, prime - 1)
        for prime, square in ((private.p, private.psquare), (private.q, private.qsquare))
    ]


def _exponents(private: PrivateKey, count: int) -> list[mpz]:
    bits = exponent_bits(private.public_key.bits)
    return [mpz(secrets.randbits(bits)) for _ in range(count)]


class ShortExponentTable:
    """h_s^a for uniform a of `exponent_bits` bits, by CRT from fixed-base tables of h_s."""

    def __init__(self, private_key: PrivateKey) -> None:
        """Raises:
        PaillierKeyError: the key has no h_s.
        """
        self._sk = private_key
        self._halves = []
        for base, square, order in _base_halves(private_key):
            rows = -(-int(order.bit_length()) // _DIGIT_BITS)
            self._halves.append((ProductTable(power_rows(base, rows, square), square), order, rows))

    @property
    def multiplications(self) -> int:
        """Products per obfuscator (for cost estimates)."""
        return sum(table.rows - 1 for table, _, _ in self._halves)

    def sample(self, count: int) -> list[mpz]:
        """`count` obfuscators h_s^a with fresh uniform exponents a."""
        return [self.power(a) for a in _exponents(self._sk, count)]

    def power(self, exponent: int | mpz) -> mpz:
        """h_s^exponent mod n^2 (exponent >= 0): one table product per byte of the
        exponent reduced mod p - 1, and likewise for q, then CRT."""
        (tp, op, rp), (tq, oq, rq) = self._halves
        xp = tp.product(int(exponent % op).to_bytes(rp, "little"))
        xq = tq.product(int(exponent % oq).to_bytes(rq, "little"))
        return self._sk.crt(xp, xq)


def short_table_cost(private: PrivateKey) -> int:
    """A `ShortExponentTable`'s build cost in obfuscators by `short_exponent_powers`."""
    products, per_obfuscator = 0.0, 0.0
    for _, _, order in _base_halves(private):
        bits = int(order.bit_length())
        products += -(-bits // _DIGIT_BITS) * ((1 << _DIGIT_BITS) - 1)
        per_obfuscator += _FULL_PRODUCTS_PER_BIT * bits
    return max(1, round(products / per_obfuscator))


def short_exponent_powers(private: PrivateKey, count: int, threads: int) -> list[mpz]:
    """`count` obfuscators h_s^a by CRT exponentiations (`gmpy2.powmod_exp_list` releases
    the GIL: the two halves run in parallel threads).

    Raises:
        PaillierKeyError: the key has no h_s.
    """
    halves = _base_halves(private)
    exps = _exponents(private, count)
    jobs = [(base, [e % order for e in exps], square) for base, square, order in halves]
    with ThreadPoolExecutor(max(1, min(threads, 2))) as executor:
        xp, xq = executor.map(lambda job: gmpy2.powmod_exp_list(*job), jobs)
    return [private.crt(a, b) for a, b in zip(xp, xq, strict=True)]
