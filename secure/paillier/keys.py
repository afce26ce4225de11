"""Paillier keys as gmpy2 integers and their generation.

Their wire form is `secure.wire.keys`, their saved form `secure.source_layers.state`.

`generate_keypair` draws the keys of Damgard-Jurik-Nielsen (as SecretFlow HEU's ZPaillier
does): n = pq with p = q = 3 (mod 4) and gcd(p - 1, q - 1) = 2, and with n the public
base h_s = h^n mod n^2 of h = -x^2 mod n for a uniform x in Z_n^*. h_s lets the owner
make its fresh encryptions with short-exponent obfuscators h_s^a
(`secure.paillier.short_exponent`). A key without h_s (wrapped from `phe`, or saved
before h_s existed) works as before, with statistical obfuscators only.

With g = n + 1, g^m = 1 + m*n (mod n^2), so encryption needs no exponentiation by m. The
private key keeps what CRT decryption and CRT obfuscators need.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass, field

import gmpy2
from gmpy2 import mpz
from phe import paillier
from vfl.secure.config import MIN_KEY_BITS, SecureConfig, check_key_bits
from vfl.secure.errors import PaillierKeyError

log = logging.getLogger(__name__)

_PRIME_TEST_REPS = 40  # GMP: Baillie-PSW, then reps - 24 Miller-Rabin rounds
_FERMAT_MARGIN = 64  # |p - q| > 2^64 n^(1/4): Fermat's factoring method cannot apply


@dataclass(frozen=True)
class PublicKey:
    """A Paillier public key with g = n + 1; `owner` names the party that can decrypt.
    `h_s` (optional): the owner's base of short-exponent obfuscators, an n-th residue."""

    n: mpz
    owner: str
    h_s: mpz | None = field(default=None, compare=False, repr=False)
    nsquare: mpz = field(init=False, repr=False)

    def __post_init__(self) -> None:
        """Raises:
        PaillierKeyError: h_s is not an element of Z_{n^2}^* other than 1.
        """
        object.__setattr__(self, "n", mpz(self.n))
        object.__setattr__(self, "nsquare", self.n * self.n)
        if self.h_s is not None:
            h_s = mpz(self.h_s)
            if not 1 < h_s < self.nsquare or gmpy2.gcd(h_s, self.n) != 1:
                raise PaillierKeyError(
                    f"the public key of '{self.owner}' has a malformed h_s (it must be a unit "
                    "mod n^2 other than 1); the key is corrupt or not from this software"
                )
            object.__setattr__(self, "h_s", h_s)

    @property
    def bits(self) -> int:
        return int(self.n.bit_length())

    @property
    def width(self) -> int:
        """Bytes of one serialised ciphertext (an element of Z_{n^2})."""
        return (int(self.nsquare.bit_length()) + 7) // 8


@dataclass(frozen=True)
class PrivateKey:
    """The factors of n and the CRT constants for decryption and obfuscators."""

    public_key: PublicKey
    p: mpz
    q: mpz
    psquare: mpz = field(init=False, repr=False)
    qsquare: mpz = field(init=False, repr=False)
    hp: mpz = field(init=False, repr=False)
    hq: mpz = field(init=False, repr=False)
    p_inv_q: mpz = field(init=False, repr=False)
    psquare_inv_qsquare: mpz = field(init=False, repr=False)

    def __post_init__(self) -> None:
        """Raises:
        PaillierKeyError: the factors do not match n, or h_s is not an n-th residue.
        """
        p, q = sorted((mpz(self.p), mpz(self.q)))
        if p * q != self.public_key.n or p == q:
            raise PaillierKeyError("private key factors do not match the public modulus")
        values = {"p": p, "q": q, "psquare": p * p, "qsquare": q * q}
        values["hp"] = _h_function(p, values["psquare"], self.public_key.n)
        values["hq"] = _h_function(q, values["qsquare"], self.public_key.n)
        values["p_inv_q"] = gmpy2.invert(p, q)
        values["psquare_inv_qsquare"] = gmpy2.invert(values["psquare"], values["qsquare"])
        for name, value in values.items():
            object.__setattr__(self, name, value)
        h_s = self.public_key.h_s
        if h_s is not None and not self.is_nth_residue(h_s):
            raise PaillierKeyError(
                f"h_s of the key of '{self.public_key.owner}' is not an n-th residue: its "
                "encryptions would not decrypt; the key is corrupt"
            )

    def crt(self, xp: mpz, xq: mpz) -> mpz:
        """The x mod n^2 with x = xp (mod p^2) and x = xq (mod q^2)."""
        return xp + self.psquare * ((xq - xp) * self.psquare_inv_qsquare % self.qsquare)

    def is_nth_residue(self, x: mpz) -> bool:
        """Whether x is an n-th residue mod n^2 (an encryption of 0): the n-th residues
        mod p^2 are the subgroup of order p - 1."""
        return bool(
            gmpy2.powmod(x, self.p - 1, self.psquare) == 1
            and gmpy2.powmod(x, self.q - 1, self.qsquare) == 1
        )

    def __repr__(self) -> str:  # never print factors
        return f"PrivateKey(owner={self.public_key.owner!r}, bits={self.public_key.bits})"


def _h_function(x: mpz, xsquare: mpz, n: mpz) -> mpz:
    """h_x = L_x(g^(x-1) mod x^2)^-1 mod x, with g = n + 1."""
    return gmpy2.invert((gmpy2.powmod(n + 1, x - 1, xsquare) - 1) // x, x)


@dataclass(frozen=True)
class KeyPair:
    public: PublicKey
    private: PrivateKey


def generate_keypair(owner: str, config: SecureConfig) -> KeyPair:
    """Generate a key pair of `config.key_bits` bits for party `owner`, with the primes
    and the public base h_s of short-exponent obfuscators (see the module doc).

    Raises:
        PaillierKeyError: the configured size is below the minimum (see `check_key_bits`).
    """
    check_key_bits(config.key_bits, config.allow_insecure_test_keys, owner)
    p, q = blum_primes(config.key_bits)
    public = PublicKey(p * q, owner)
    warn_if_test_key(public)
    public = PublicKey(public.n, owner, short_exponent_base(PrivateKey(public, p, q)))
    return KeyPair(public, PrivateKey(public, p, q))


def blum_primes(bits: int) -> tuple[mpz, mpz]:
    """Primes p, q = 3 (mod 4) with gcd(p - 1, q - 1) = 2, whose product has exactly
    `bits` bits and which lie far enough apart for Fermat's method."""
    p = _prime_3_mod_4((bits + 1) // 2)
    while True:
        q = _prime_3_mod_4(bits // 2)
        far = abs(p - q).bit_length() > bits // 4 + _FERMAT_MARGIN
        if far and gmpy2.gcd(p - 1, q - 1) == 2:
            return p, q


def _prime_3_mod_4(bits: int) -> mpz:
    """A prime of `bits` bits, = 3 (mod 4), with its two top bits set (so that the product
    of two has the sum of their lengths); each candidate is drawn afresh (no bias towards
    primes after long gaps)."""
    top = mpz(3) << (bits - 2)
    while True:
        candidate = mpz(secrets.randbits(bits)) | top | 3
        if gmpy2.is_prime(candidate, _PRIME_TEST_REPS):
            return candidate


def short_exponent_base(private: PrivateKey) -> mpz:
    """h_s = h^n mod n^2 with h = -x^2 mod n for a uniform x in Z_n^*, by CRT."""
    n = private.public_key.n
    while True:
        x = mpz(secrets.randbelow(int(n)))
        if x > 1 and gmpy2.gcd(x, n) == 1:
            break
    h = -x * x % n
    hp = gmpy2.powmod(h, n, private.psquare)
    hq = gmpy2.powmod(h, n, private.qsquare)
    return private.crt(hp, hq)


def keypair_from_phe(
    owner: str,
    pk: paillier.PaillierPublicKey,
    sk: paillier.PaillierPrivateKey,
    config: SecureConfig,
) -> KeyPair:
    """Wrap a `phe` key pair (e.g. a pre-generated test key) for party `owner`; it has no
    h_s, so its owner's obfuscators stay statistical.

    Raises:
        PaillierKeyError: the key is below the minimum size or does not match its factors.
    """
    public = PublicKey(mpz(pk.n), owner)
    check_key_bits(public.bits, config.allow_insecure_test_keys, owner)
    warn_if_test_key(public)
    return KeyPair(public, PrivateKey(public, mpz(sk.p), mpz(sk.q)))


def warn_if_test_key(key: PublicKey) -> None:
    if key.bits < MIN_KEY_BITS:
        log.warning(
            "party %s uses an INSECURE %d-bit Paillier test key (minimum %d bits)",
            key.owner,
            key.bits,
            MIN_KEY_BITS,
        )
