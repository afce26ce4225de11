"""Public keys on the wire: `vfl.v1.PublicKey` holds n big-endian and the owner's id.

A received key is checked for its owner, its shape (an odd modulus) and the minimum size.
"""

from __future__ import annotations

from gmpy2 import mpz

from proto import common_pb2
from secure.config import SecureConfig, check_key_bits
from secure.errors import KeyError_, PayloadError
from secure.paillier.keys import PublicKey, warn_if_test_key

Payload = common_pb2.Payload


def public_key_to_payload(key: PublicKey) -> Payload:
    n = int(key.n)
    data = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return Payload(public_key=common_pb2.PublicKey(n=data, owner=key.owner))


def public_key_from_payload(payload: Payload, owner: str, config: SecureConfig) -> PublicKey:
    """Decode and check a peer's public key.

    Raises:
        PayloadError: not a public-key payload, or it names another owner.
        KeyError_: the modulus is malformed (even, empty) or below the minimum size.
    """
    kind = payload.WhichOneof("kind")
    if kind != "public_key":
        raise PayloadError(f"expected a public_key payload from '{owner}', got '{kind}'")
    if payload.public_key.owner != owner:
        raise PayloadError(
            f"public key names owner '{payload.public_key.owner}', expected '{owner}'; "
            "are both parties running the same job?"
        )
    n = mpz(int.from_bytes(payload.public_key.n, "big"))
    if n < 3 or n % 2 == 0:
        raise KeyError_(f"public key of '{owner}' is not an odd modulus; regenerate it")
    check_key_bits(int(n.bit_length()), config.allow_insecure_test_keys, owner)
    key = PublicKey(n, owner)
    warn_if_test_key(key)
    return key
