"""`CipherMatrix` on the wire: strict encoding and decoding of `vfl.v1.Ciphertexts`.

The values are one blob of fixed-width big-endian integers, `width` bytes each (the byte
size of n^2), row-major over `shape` = (rows, packed columns), with the slot count, the
fixed-point scale and the key owner. Every field is checked on receipt against what the
protocol step expects.
"""

from __future__ import annotations

from collections.abc import Sequence

from gmpy2 import mpz
from vfl.proto import common_pb2
from vfl.secure.errors import PayloadError
from vfl.secure.paillier.cipher_matrix import CipherMatrix, join_blob, split_blob
from vfl.secure.paillier.keys import PublicKey

Payload = common_pb2.Payload


def ciphertexts_to_payload(matrix: CipherMatrix) -> Payload:
    """Serialise as one fixed-width big-endian blob."""
    message = common_pb2.Ciphertexts(
        width=matrix.key.width,
        shape=list(matrix.shape),
        blob=join_blob(matrix.rows, matrix.key),
        slots=matrix.slots,
        scale_bits=matrix.scale_bits,
        key_owner=matrix.key_owner,
    )
    return Payload(ciphertexts=message)


def ciphertexts_from_payload(
    payload: Payload,
    key: PublicKey,
    *,
    shape: Sequence[int | None],
    slots: int,
    scale_bits: int,
) -> CipherMatrix:
    """Decode and check ciphertexts that must be under `key`; None in `shape` matches any.

    Raises:
        PayloadError: wrong payload kind, key owner, width, shape, count, slot count or
            scale, or a value outside [1, n^2).
    """
    kind = payload.WhichOneof("kind")
    if kind != "ciphertexts":
        raise PayloadError(f"expected a ciphertexts payload, got '{kind}'")
    msg = payload.ciphertexts
    _check_key(msg, key)
    dims = _check_shape(msg, key, shape)
    if msg.slots != slots or msg.scale_bits != scale_bits:
        raise PayloadError(
            f"ciphertexts pack {msg.slots} slots at scale 2^{msg.scale_bits}, expected "
            f"{slots} slots at 2^{scale_bits}; the parties' SecureConfigs disagree"
        )
    return CipherMatrix(_split(msg.blob, key, dims), dims[1], key, slots, scale_bits)


def _check_key(msg: common_pb2.Ciphertexts, key: PublicKey) -> None:
    if msg.key_owner != key.owner:
        raise PayloadError(
            f"ciphertexts are under the key of '{msg.key_owner}', expected '{key.owner}'; "
            "the sender used the wrong public key or the parties disagree on roles"
        )
    if msg.width != key.width:
        raise PayloadError(
            f"ciphertext width {msg.width} bytes does not match the {key.width} bytes of "
            f"the {key.bits}-bit key of '{key.owner}'; both sides must use the same key"
        )


def _check_shape(
    msg: common_pb2.Ciphertexts, key: PublicKey, shape: Sequence[int | None]
) -> list[int]:
    dims = [int(d) for d in msg.shape]
    if len(dims) != 2 or any(d < 0 for d in dims) or len(shape) != 2:
        raise PayloadError(f"ciphertext shape {dims} is not a (rows, columns) pair")
    if any(want is not None and want != got for want, got in zip(shape, dims, strict=True)):
        raise PayloadError(
            f"expected ciphertexts of shape {list(shape)}, got {dims}; "
            "do the parties agree on batch size and output width?"
        )
    count = dims[0] * dims[1]
    if len(msg.blob) != count * key.width:
        raise PayloadError(
            f"ciphertext blob holds {len(msg.blob)} bytes, but {count} ciphertexts of "
            f"{key.width} bytes need {count * key.width}; the message is truncated or "
            "its shape is wrong"
        )
    return dims


def _split(blob: bytes, key: PublicKey, dims: list[int]) -> list[list[mpz]]:
    rows = split_blob(blob, key, dims[1]) if dims[1] else [[] for _ in range(dims[0])]
    if rows is None:
        raise PayloadError(
            f"a ciphertext lies outside [1, n^2) of the key of '{key.owner}'; "
            "the payload is corrupt"
        )
    return rows
