"""Paillier keys as gmpy2 integers and their generation (via `phe`).

Their wire form is `secure.wire.keys`.

`phe` generates the primes; everything after that uses the precomputed gmpy2 values
below. With g = n + 1, g^m = 1 + m*n (mod n^2), so encryption needs no exponentiation
by m. The private key keeps what CRT decryption and CRT obfuscators need.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import gmpy2
from gmpy2 import mpz
from phe import paillier

from secure.config import MIN_KEY_BITS, SecureConfig, check_key_bits
from secure.errors import KeyError_

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PublicKey:
    """A Paillier public key with g = n + 1; `owner` names the party that can decrypt."""

    n: mpz
    owner: str
    nsquare: mpz = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "n", mpz(self.n))
        object.__setattr__(self, "nsquare", self.n * self.n)

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
        p, q = sorted((mpz(self.p), mpz(self.q)))
        if p * q != self.public_key.n or p == q:
            raise KeyError_("private key factors do not match the public modulus")
        values = {"p": p, "q": q, "psquare": p * p, "qsquare": q * q}
        values["hp"] = _h_function(p, values["psquare"], self.public_key.n)
        values["hq"] = _h_function(q, values["qsquare"], self.public_key.n)
        values["p_inv_q"] = gmpy2.invert(p, q)
        values["psquare_inv_qsquare"] = gmpy2.invert(values["psquare"], values["qsquare"])
        for name, value in values.items():
            object.__setattr__(self, name, value)

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
    """Generate a key pair of `config.key_bits` bits for party `owner`.

    Raises:
        KeyError_: the configured size is below the minimum (see `check_key_bits`).
    """
    check_key_bits(config.key_bits, config.allow_insecure_test_keys, owner)
    pk, sk = paillier.generate_paillier_keypair(n_length=config.key_bits)
    return keypair_from_phe(owner, pk, sk, config)


def keypair_from_phe(
    owner: str,
    pk: paillier.PaillierPublicKey,
    sk: paillier.PaillierPrivateKey,
    config: SecureConfig,
) -> KeyPair:
    """Wrap a `phe` key pair (e.g. a pre-generated test key) for party `owner`.

    Raises:
        KeyError_: the key is below the minimum size or does not match its factors.
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
