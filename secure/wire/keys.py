"""Public keys on the wire: `vfl.v1.PublicKey` holds n and h_s big-endian and the owner's id;
an Okamoto-Uchiyama key (`scheme` "ou") holds n = p^2 q and its bases G and H instead.

A received key is checked for its owner, its scheme, its shape (an odd modulus; h_s, if
any, a unit mod n^2 other than 1; G and H units mod n other than 1) and the minimum size.
An empty h_s means the key has none.
"""

from __future__ import annotations

from gmpy2 import mpz
from vfl.proto import common_pb2
from vfl.secure.config import SecureConfig, check_key_bits
from vfl.secure.errors import PaillierKeyError, PayloadError
from vfl.secure.ou.keys import OuPublicKey, check_key_bits as check_ou_key_bits
from vfl.secure.paillier.keys import PublicKey, warn_if_test_key

Payload = common_pb2.Payload


def _big_endian(value: mpz | None) -> bytes:
    if value is None:
        return b""
    number = int(value)
    return number.to_bytes((number.bit_length() + 7) // 8, "big")


def public_key_to_payload(key: PublicKey) -> Payload:
    message = common_pb2.PublicKey(n=_big_endian(key.n), owner=key.owner, h_s=_big_endian(key.h_s))
    return Payload(public_key=message)


def public_key_from_payload(payload: Payload, owner: str, config: SecureConfig) -> PublicKey:
    """Decode and check a peer's public key.

    Raises:
        PayloadError: not a public-key payload, or it names another owner.
        PaillierKeyError: the modulus is malformed (even, empty) or below the minimum size, or
            h_s is malformed (not a unit mod n^2 other than 1).
    """
    message = _key_message(payload, owner, "")
    n = mpz(int.from_bytes(message.n, "big"))
    if n < 3 or n % 2 == 0:
        raise PaillierKeyError(f"public key of '{owner}' is not an odd modulus; regenerate it")
    check_key_bits(int(n.bit_length()), config.allow_insecure_test_keys, owner)
    h_s = mpz(int.from_bytes(message.h_s, "big")) if message.h_s else None
    key = PublicKey(n, owner, h_s)
    warn_if_test_key(key)
    return key


def ou_public_key_to_payload(key: OuPublicKey) -> Payload:
    message = common_pb2.PublicKey(
        n=_big_endian(key.n),
        owner=key.owner,
        scheme="ou",
        g=_big_endian(key.g),
        h=_big_endian(key.h),
    )
    return Payload(public_key=message)


def ou_public_key_from_payload(
    payload: Payload, owner: str, allow_insecure_test_keys: bool = False
) -> OuPublicKey:
    """Decode and check a peer's Okamoto-Uchiyama public key.

    Raises:
        PayloadError: not a public-key payload, another scheme, or another owner.
        OuKeyError: n is malformed or below the minimum size, or G or H is not a unit mod
            n other than 1.
    """
    message = _key_message(payload, owner, "ou")
    n = mpz(int.from_bytes(message.n, "big"))
    check_ou_key_bits(int(n.bit_length()), allow_insecure_test_keys, f"'{owner}'")
    g, h = (mpz(int.from_bytes(v, "big")) for v in (message.g, message.h))
    return OuPublicKey(n, g, h, owner)


_SCHEMES = {"": "Paillier", "ou": "Okamoto-Uchiyama"}


def _key_message(payload: Payload, owner: str, scheme: str) -> common_pb2.PublicKey:
    """The `PublicKey` of a payload, checked for its kind, scheme and owner."""
    kind = payload.WhichOneof("kind")
    if kind != "public_key":
        raise PayloadError(f"expected a public_key payload from '{owner}', got '{kind}'")
    message = payload.public_key
    if message.scheme != scheme:
        got = _SCHEMES.get(message.scheme, repr(message.scheme))
        raise PayloadError(
            f"'{owner}' sent a key of scheme {got}, expected {_SCHEMES[scheme]}; "
            "do the parties run the same protocol?"
        )
    if message.owner != owner:
        raise PayloadError(
            f"public key names owner '{message.owner}', expected '{owner}'; "
            "are both parties running the same job?"
        )
    return message
