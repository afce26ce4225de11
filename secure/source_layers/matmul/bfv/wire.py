"""BFV ciphertexts and keys as `Payload`s: SEAL's own bytes (zstd-compressed; fresh
encryptions seeded), several per message in a `Ciphertexts` payload whose `shape` lists
the byte length of each (`width` 0: variable length) and whose `key_owner` names the key.
"""

from __future__ import annotations

from vfl.proto import common_pb2
from vfl.secure.errors import PayloadError

Payload = common_pb2.Payload

MAX_BLOB = 1 << 24  # no ciphertext or key of ours is above 16 MiB


def blobs_to_payload(blobs: list[bytes], owner: str) -> Payload:
    message = common_pb2.Ciphertexts(
        width=0, shape=[len(b) for b in blobs], blob=b"".join(blobs), key_owner=owner
    )
    return Payload(ciphertexts=message)


def blobs_from_payload(payload: Payload, owner: str, count: int | None = None) -> list[bytes]:
    """Raises:
    PayloadError: not BFV ciphertexts under `owner`'s key, or not `count` of them.
    """
    if payload.WhichOneof("kind") != "ciphertexts":
        raise PayloadError(f"expected BFV ciphertexts, got '{payload.WhichOneof('kind')}'")
    message = payload.ciphertexts
    sizes = [int(s) for s in message.shape]
    if message.width != 0 or any(not 0 < s <= MAX_BLOB for s in sizes):
        raise PayloadError("not a BFV ciphertext message (width must be 0, sizes positive)")
    if sum(sizes) != len(message.blob):
        raise PayloadError(f"BFV ciphertexts of {sum(sizes)} bytes, got {len(message.blob)}")
    if message.key_owner != owner:
        raise PayloadError(f"ciphertexts under the key of '{message.key_owner}', not '{owner}'")
    if count is not None and len(sizes) != count:
        raise PayloadError(f"expected {count} BFV ciphertexts, got {len(sizes)}")
    out, start = [], 0
    for size in sizes:
        out.append(bytes(message.blob[start : start + size]))
        start += size
    return out
