"""Bucket sums on the wire, checked on the way in.

    layout         a `layer_setup` payload, step `buckets` (`vfl.v1.BucketLayout`): the
                   active party's k, scale, value bits and rows; slots and packing follow
                   from them and the key, so both sides derive the same
    row ciphertexts    a `ciphertexts` payload: shape (rows, parts), `slots` values per
                   ciphertext at `scale_bits`, under the active party's key
    packed buckets     a `ciphertexts` payload: shape (packed, 1), `slots` = the values one
                   packed ciphertext holds

Ciphertexts are one blob of fixed-width big-endian integers (the bytes of n), as for
Paillier (`secure.wire.ciphertexts`). Every field is checked against the layout and the
count the receiver expects, and every ciphertext against [1, n): anything else is a
`PayloadError` naming what is wrong.
"""

from __future__ import annotations

import numpy as np
from gmpy2 import mpz
from vfl.proto import common_pb2
from vfl.secure.errors import EncodingError, InputError, PayloadError
from vfl.secure.histograms.layout import Layout
from vfl.secure.histograms.packing import PackedBuckets
from vfl.secure.histograms.rows import EncryptedRows
from vfl.secure.ou.keys import OuPublicKey
from vfl.secure.paillier.blocks import blob
from vfl.secure.wire.payload import Payload, layer_setup_from_payload

_INT32 = 2**31 - 1


def layout_to_payload(layout: Layout) -> Payload:
    message = common_pb2.BucketLayout(
        values=layout.values,
        scale_bits=layout.scale_bits,
        value_bits=layout.value_bits,
        rows=layout.rows,
    )
    return Payload(layer_setup=common_pb2.LayerSetup(buckets=message))


def layout_from_payload(payload: Payload, key: OuPublicKey) -> Layout:
    """The active party's layout, for bucket sums under `key`.

    Raises:
        PayloadError: not a `buckets` setup step, or a layout no sum can be made in.
    """
    message = layer_setup_from_payload(payload, "buckets")
    try:
        return Layout(
            int(message.values),
            int(message.scale_bits),
            int(message.value_bits),
            int(message.rows),
            key.plaintext_bits,
        )
    except (InputError, EncodingError) as exc:
        raise PayloadError(f"the bucket layout from '{key.owner}' is unusable: {exc}") from None


def rows_to_payload(rows: EncryptedRows) -> Payload:
    return _to_payload(rows.key, [rows.count, rows.layout.parts], rows.data.tobytes(), rows.layout)


def rows_from_payload(payload: Payload, key: OuPublicKey, layout: Layout) -> EncryptedRows:
    """Row ciphertexts under `key`, in `layout` (at most `layout.rows` rows).

    Raises:
        PayloadError: another payload kind, key owner, width, layout or shape, a
            truncated blob, or a ciphertext outside [1, n).
    """
    message = _message(payload, key, layout, layout.slots)
    rows, parts = _shape(message)
    if parts != layout.parts or rows > layout.rows:
        raise PayloadError(
            f"row ciphertexts of shape ({rows}, {parts}); the layout takes at most "
            f"{layout.rows} rows of {layout.parts}"
        )
    _blob(message, key, rows * parts)
    data = np.frombuffer(message.blob, dtype=np.uint8).reshape(rows, parts, key.width)
    return EncryptedRows(key, layout, data)


def packed_to_payload(packed: PackedBuckets) -> Payload:
    data = blob(packed.ciphertexts, packed.key.width)
    slots = packed.layout.slots * packed.layout.per_cipher
    return _to_payload(packed.key, [len(packed.ciphertexts), 1], data, packed.layout, slots)


def packed_from_payload(
    payload: Payload, key: OuPublicKey, layout: Layout, buckets: int
) -> PackedBuckets:
    """`buckets` packed bucket sums under `key`, in `layout`.

    Raises:
        PayloadError: another payload kind, key owner, width, layout or count, a
            truncated blob, or a ciphertext outside [1, n).
    """
    message = _message(payload, key, layout, layout.slots * layout.per_cipher)
    count, columns = _shape(message)
    if columns != 1 or count != layout.packed_count(buckets):
        raise PayloadError(
            f"{count} x {columns} packed ciphertexts; {buckets} buckets take "
            f"{layout.packed_count(buckets)} x 1 in this layout"
        )
    return PackedBuckets(key, layout, buckets, _blob(message, key, count))


def _to_payload(
    key: OuPublicKey, shape: list[int], data: bytes, layout: Layout, slots: int | None = None
) -> Payload:
    message = common_pb2.Ciphertexts(
        width=key.width,
        shape=shape,
        blob=data,
        slots=layout.slots if slots is None else slots,
        scale_bits=layout.scale_bits,
        key_owner=key.owner,
    )
    return Payload(ciphertexts=message)


def _message(
    payload: Payload, key: OuPublicKey, layout: Layout, slots: int
) -> common_pb2.Ciphertexts:
    kind = payload.WhichOneof("kind")
    if kind != "ciphertexts":
        raise PayloadError(f"expected a ciphertexts payload of bucket sums, got '{kind}'")
    message = payload.ciphertexts
    if message.key_owner != key.owner or message.width != key.width:
        raise PayloadError(
            f"ciphertexts of {message.width} bytes under the key of '{message.key_owner}'; "
            f"expected {key.width} bytes under the key of '{key.owner}'"
        )
    if message.slots != slots or message.scale_bits != layout.scale_bits:
        raise PayloadError(
            f"ciphertexts of {message.slots} slots at 2^{message.scale_bits}; the layout has "
            f"{slots} at 2^{layout.scale_bits}: do the parties agree on the layout?"
        )
    return message


def _shape(message: common_pb2.Ciphertexts) -> tuple[int, int]:
    dims = [int(d) for d in message.shape]
    if len(dims) != 2 or any(not 0 <= d <= _INT32 for d in dims):
        raise PayloadError(f"ciphertext shape {dims} is not a (rows, columns) pair")
    return dims[0], dims[1]


def _blob(message: common_pb2.Ciphertexts, key: OuPublicKey, count: int) -> list[mpz]:
    """The `count` ciphertexts of the message's blob, each checked to lie in [1, n)."""
    width = key.width
    if len(message.blob) != count * width:
        raise PayloadError(
            f"the blob holds {len(message.blob)} bytes; {count} ciphertexts of {width} bytes "
            f"need {count * width}: the message is truncated or its shape is wrong"
        )
    data = message.blob
    values = [mpz.from_bytes(data[i : i + width], "big") for i in range(0, len(data), width)]
    if any(not 0 < c < key.n for c in values):
        raise PayloadError(
            f"a ciphertext lies outside [1, n) of the key of '{key.owner}': the payload is corrupt"
        )
    return values
