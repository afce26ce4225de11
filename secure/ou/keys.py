"""Okamoto-Uchiyama keys as gmpy2 integers, and their generation.

The scheme is Okamoto-Uchiyama (EUROCRYPT '98) in the variant of Coron, Naccache and
Paillier ("Accelerating Okamoto-Uchiyama's public-key cryptosystem", Electronics Letters
35(4), 1999), the one SecretFlow's HEU and FATE ship:

    n = p^2 q                 p of ceil(L / 3) bits, q the rest of an L-bit modulus
    p - 1 = t u               t a prime of 2 lambda bits (224 at L = 2048, 256 at 3072)
    q = 2 q' + 1              a safe prime
    G = g^u mod n             g with g^(p-1) != 1 (mod p^2)
    H = G^n mod n             (textbook OU's h = g^n, with G for g)
    Enc(m, r) = G^m H^r mod n
    Dec(c) = L(c^t mod p^2) / L(G^t mod p^2) mod p,   L(x) = (x - 1) / p

Modulo p^2 (a group C_p x C_(p-1)), G has order p t and H order t, so c^t mod p^2 = (G^t)^m
lies in C_p, where L reads m mod p off: decryption is one exponentiation by the 2
lambda-bit t modulo p^2, a third of a modulus. Modulo q, G (a square, u being even) and H
both generate the quadratic residues, of prime order q'. So a ciphertext is, by CRT, an
element of C_p x C_t mod p^2 whose C_p part is fixed by m and whose C_t part is uniform,
next to a uniform quadratic residue mod q: that is what lets the owner encrypt with one
table (`secure.ou.cipher`). Semantic security rests on the hardness of telling elements
of <H> (order t q', unknown without the factors) from elements of G^m <H>; t has 2 lambda
bits so that finding the order of H mod p^2 generically (Pollard's rho or kangaroo with
gcds against n) costs 2^lambda.

Modulus size against Paillier's: the number field sieve depends on |n| only, so an L-bit
n = p^2 q costs what an L-bit RSA or Paillier modulus costs to factor; the elliptic curve
method depends on the smallest factor, and three factors of L / 3 bits (683 at 2048,
about 2^110 operations by the usual L_p[1/2, sqrt 2] estimate; 1024 at 3072, about
2^139) keep it no faster than the sieve: three factors is the bound of multi-prime RSA
at 2048 bits (Lenstra, "Unbelievable security", ASIACRYPT 2001; Hinek, "On the security
of multi-prime RSA", J. Math. Cryptology 2008). The lattice method for n = p^r q (Boneh,
Durfee, Howgrave-Graham, CRYPTO '99) beats the elliptic curve method only for large r,
not r = 2. So `key_bits` 2048 is matched at 2048 bits (112-bit security) and 3072 at
3072 (128-bit); docs/protocols.md ("Encrypted bucket sums") has the comparison.

The plaintext space is Z_p. p has exactly ceil(L / 3) bits, so signed plaintexts with
|m| < 2^(plaintext_bits - 1) decrypt exactly (`OuPublicKey.plaintext_bits`, public).
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass, field

import gmpy2
from gmpy2 import mpz
from vfl.secure.config import MIN_KEY_BITS, MIN_TEST_KEY_BITS
from vfl.secure.errors import OuKeyError

log = logging.getLogger(__name__)

_PRIME_TEST_REPS = 40  # GMP: Baillie-PSW, then reps - 24 Miller-Rabin rounds
_DISTANCE_MARGIN = 64  # |p - q| > 2^(|p|/2 + 64): no factor near the cube root of n
_SMALL_PRIMES = mpz(gmpy2.primorial(20_000) // 2)  # odd primes below 20,000: a quick sieve


def security_bits(key_bits: int) -> int:
    """The security level lambda an L-bit modulus gives (NIST SP 800-57: 112 at 2048, 128
    at 3072); below 2048 bits (test keys only) 80, or less where p is too short for it."""
    if key_bits >= 3072:
        return 128
    if key_bits >= MIN_KEY_BITS:
        return 112
    return min(80, (prime_bits(key_bits) - 32) // 2)


def prime_bits(key_bits: int) -> int:
    """Bits of p in an L-bit n = p^2 q: ceil(L / 3)."""
    return -(-key_bits // 3)


def factor_bits(key_bits: int) -> int:
    """Bits of the prime t dividing p - 1: 2 lambda."""
    return 2 * security_bits(key_bits)


def check_key_bits(bits: int, allow_insecure_test_keys: bool, whose: str) -> None:
    """Raises:
    OuKeyError: `bits` below 2048 (or below 512 with `allow_insecure_test_keys`).
    """
    if bits < MIN_TEST_KEY_BITS or (bits < MIN_KEY_BITS and not allow_insecure_test_keys):
        raise OuKeyError(
            f"the Okamoto-Uchiyama key of {whose} has {bits} bits; the minimum is "
            f"{MIN_KEY_BITS} (keys of {MIN_TEST_KEY_BITS}..{MIN_KEY_BITS - 1} bits only for "
            "tests, with allow_insecure_test_keys)"
        )


@dataclass(frozen=True)
class OuPublicKey:
    """n = p^2 q, the bases G and H, and `owner`, the party that can decrypt."""

    n: mpz
    g: mpz
    h: mpz
    owner: str

    def __post_init__(self) -> None:
        """Raises:
        OuKeyError: n is not odd, or G or H is not a unit mod n other than 1.
        """
        n, g, h = mpz(self.n), mpz(self.g), mpz(self.h)
        if n < 3 or n % 2 == 0:
            raise OuKeyError(f"the key of '{self.owner}' is not an odd modulus; regenerate it")
        for name, base in (("G", g), ("H", h)):
            if not 1 < base < n or gmpy2.gcd(base, n) != 1:
                raise OuKeyError(
                    f"the key of '{self.owner}' has a malformed {name} (it must be a unit mod "
                    "n other than 1); the key is corrupt or not from this software"
                )
        object.__setattr__(self, "n", n)
        object.__setattr__(self, "g", g)
        object.__setattr__(self, "h", h)

    @property
    def bits(self) -> int:
        return int(self.n.bit_length())

    @property
    def width(self) -> int:
        """Bytes of one serialised ciphertext (an element of Z_n)."""
        return (self.bits + 7) // 8

    @property
    def plaintext_bits(self) -> int:
        """Signed plaintexts with |m| < 2^(plaintext_bits - 1) decrypt exactly (p has
        `prime_bits` bits, so p / 2 >= 2^(plaintext_bits - 1))."""
        return prime_bits(self.bits) - 1

    @property
    def randomness_bits(self) -> int:
        """A bound on log2 of the order of H for a key made by `generate_ou_keypair`:
        t (2 lambda bits) times a divisor of q - 1 (q < 2^(L - 2|p| + 2))."""
        return factor_bits(self.bits) + self.bits - 2 * prime_bits(self.bits) + 2


@dataclass(frozen=True)
class OuPrivateKey:
    """p, q, t and the constants of decryption and of the owner's CRT encryption."""

    public_key: OuPublicKey
    p: mpz
    q: mpz
    t: mpz
    psquare: mpz = field(init=False, repr=False)
    gp_inv: mpz = field(init=False, repr=False)  # L(G^t mod p^2)^-1 mod p
    kappa: mpz = field(init=False, repr=False)  # L(G^t mod p^2) t^-1 mod p
    psquare_inv_q: mpz = field(init=False, repr=False)

    def __post_init__(self) -> None:
        """Raises:
        OuKeyError: the factors do not match n, t does not divide p - 1, q is not a safe
            prime, G^t or H is 1 mod p^2 (nothing would decrypt, or the p-halves would not
            be random), H is not G^n, or H mod q is not a square other than 1.
        """
        p, q, t = mpz(self.p), mpz(self.q), mpz(self.t)
        key = self.public_key
        psquare = p * p
        if psquare * q != key.n or p == q or (p - 1) % t != 0:
            raise OuKeyError(f"the private key of '{key.owner}' does not match its public key")
        gt = gmpy2.powmod(key.g, t, psquare)
        h_p, h_q = key.h % psquare, key.h % q
        if (
            gt == 1
            or h_p == 1
            or h_q == 1
            or gmpy2.powmod(h_q, (q - 1) // 2, q) != 1
            or not gmpy2.is_prime((q - 1) // 2, _PRIME_TEST_REPS)
            or key.h != gmpy2.powmod(key.g, key.n, key.n)
        ):
            raise OuKeyError(
                f"the bases of the key of '{key.owner}' do not fit its factors; regenerate it"
            )
        lg = (gt - 1) // p
        values = {
            "p": p,
            "q": q,
            "t": t,
            "psquare": psquare,
            "gp_inv": gmpy2.invert(lg, p),
            "kappa": lg * gmpy2.invert(t, p) % p,
            "psquare_inv_q": gmpy2.invert(psquare, q),
        }
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def crt(self, xp: mpz, xq: mpz) -> mpz:
        """The x mod n with x = xp (mod p^2) and x = xq (mod q)."""
        return xp + self.psquare * ((xq - xp) * self.psquare_inv_q % self.q)

    def __repr__(self) -> str:  # never print factors
        return f"OuPrivateKey(owner={self.public_key.owner!r}, bits={self.public_key.bits})"


@dataclass(frozen=True)
class OuKeyPair:
    public: OuPublicKey
    private: OuPrivateKey


def generate_ou_keypair(
    owner: str, key_bits: int = MIN_KEY_BITS, allow_insecure_test_keys: bool = False
) -> OuKeyPair:
    """A fresh key pair of exactly `key_bits` bits for party `owner` (see the module doc);
    every random value comes from `secrets`.

    Raises:
        OuKeyError: `key_bits` below the minimum (see `check_key_bits`).
    """
    check_key_bits(key_bits, allow_insecure_test_keys, owner)
    p, t = _prime_with_factor(prime_bits(key_bits), factor_bits(key_bits))
    q = _safe_cofactor_prime(p, t, key_bits)
    n = p * p * q
    big_g, big_h = _bases(p, t, n)
    public = OuPublicKey(n, big_g, big_h, owner)
    if key_bits < MIN_KEY_BITS:
        log.warning(
            "party %s uses an INSECURE %d-bit Okamoto-Uchiyama test key (minimum %d bits)",
            owner,
            key_bits,
            MIN_KEY_BITS,
        )
    return OuKeyPair(public, OuPrivateKey(public, p, q, t))


def _random_prime(bits: int) -> mpz:
    """A uniform prime of exactly `bits` bits (each candidate drawn afresh)."""
    while True:
        candidate = mpz(secrets.randbits(bits - 1)) | (mpz(1) << (bits - 1)) | 1
        if gmpy2.is_prime(candidate, _PRIME_TEST_REPS):
            return candidate


def _prime_with_factor(bits: int, t_bits: int) -> tuple[mpz, mpz]:
    """(p, t): a prime p of exactly `bits` bits with p - 1 = t u, t a prime of `t_bits`
    bits and u even, drawn uniformly from its range."""
    t = _random_prime(t_bits)
    low = ((mpz(1) << (bits - 1)) + 2 * t - 1) // (2 * t)  # p = 2 t v + 1 >= 2^(bits-1)
    high = ((mpz(1) << bits) - 2) // (2 * t)  # p < 2^bits
    while True:
        p = 2 * t * (low + mpz(secrets.randbelow(int(high - low + 1)))) + 1
        if gmpy2.is_prime(p, _PRIME_TEST_REPS):
            return p, t


def _safe_cofactor_prime(p: mpz, t: mpz, key_bits: int) -> mpz:
    """A safe prime q = 2 q' + 1 with p^2 q of exactly `key_bits` bits, far from p, each
    candidate drawn afresh (a few seconds at 2048 bits): q - 1 = 2 q' shares no factor
    with n or t, so H mod q generates the squares mod q and the orders of H mod p^2 and
    mod q are coprime."""
    psquare = p * p
    low = (((mpz(1) << (key_bits - 1)) + psquare - 1) // psquare) // 2  # q' >= low
    high = (((mpz(1) << key_bits) - 1) // psquare - 1) // 2  # q = 2 q' + 1 <= high bound
    far = int(p.bit_length()) // 2 + _DISTANCE_MARGIN
    while True:
        half = low + mpz(secrets.randbelow(int(high - low + 1)))
        q = 2 * half + 1
        if (
            gmpy2.gcd(half * q, _SMALL_PRIMES) == 1
            and abs(p - q).bit_length() > far
            and half not in (p, t)
            and gmpy2.is_prime(half, 1)
            and gmpy2.is_prime(q, _PRIME_TEST_REPS)
            and gmpy2.is_prime(half, _PRIME_TEST_REPS)
        ):
            return q


def _bases(p: mpz, t: mpz, n: mpz) -> tuple[mpz, mpz]:
    """(G, H) = (g^u, G^n) mod n for a uniform unit g with g^(p-1) != 1 and H != 1
    (mod p^2): G has the order-p component decryption reads, H the order-t one that
    randomises the p-half of a ciphertext."""
    psquare = p * p
    while True:
        g = mpz(secrets.randbelow(int(n - 2))) + 2
        if gmpy2.gcd(g, n) != 1 or gmpy2.powmod(g, p - 1, psquare) == 1:
            continue
        big_g = gmpy2.powmod(g, (p - 1) // t, n)
        big_h = gmpy2.powmod(big_g, n, n)
        if big_h % psquare != 1:
            return big_g, big_h
