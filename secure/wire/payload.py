"""Symmetric converters between arrays and `Payload` protobufs, with input checks.

Every incoming tensor is checked for kind, dtype, shape and finiteness before use; row
ids (online scoring) for count and length.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from google.protobuf.message import Message
from vfl.proto import common_pb2
from vfl.secure.errors import PayloadError

Payload = common_pb2.Payload

_DTYPES = {
    "float32": np.float32,
    "float64": np.float64,
    "int64": np.int64,
    "uint8": np.uint8,  # packed bits (a tree split's row partition)
}


def tensor_to_payload(array: np.ndarray) -> Payload:
    arr = np.ascontiguousarray(array)
    name = arr.dtype.name
    if name not in _DTYPES:
        raise PayloadError(f"cannot send dtype {name}; use one of {sorted(_DTYPES)}")
    data = arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
    return Payload(tensor=common_pb2.Tensor(dtype=name, shape=list(arr.shape), data=data))


def tensor_from_payload(
    payload: Payload,
    *,
    shape: Sequence[int | None] | None = None,
    dtype: str | None = None,
) -> np.ndarray:
    """Decode a tensor payload; `shape` entries of None match any size.

    Raises:
        PayloadError: wrong payload kind, dtype, byte count or shape, or non-finite values.
    """
    if payload.WhichOneof("kind") != "tensor":
        raise PayloadError(f"expected a tensor payload, got '{payload.WhichOneof('kind')}'")
    t = payload.tensor
    if t.dtype not in _DTYPES:
        raise PayloadError(f"tensor dtype '{t.dtype}' is not one of {sorted(_DTYPES)}")
    if dtype is not None and t.dtype != dtype:
        raise PayloadError(f"expected a {dtype} tensor, got {t.dtype}")
    np_dtype = np.dtype(_DTYPES[t.dtype]).newbyteorder("<")
    dims = [int(d) for d in t.shape]
    if any(d < 0 for d in dims):
        raise PayloadError(f"tensor shape {dims} has a negative dimension")
    expected = int(np.prod(dims, dtype=np.int64)) * np_dtype.itemsize
    if expected != len(t.data):
        raise PayloadError(f"tensor of shape {dims} needs {expected} bytes, got {len(t.data)}")
    if shape is not None:
        wrong = len(shape) != len(dims) or any(
            s is not None and s != d for s, d in zip(shape, dims, strict=True)
        )
        if wrong:
            raise PayloadError(f"expected tensor shape {list(shape)}, got {dims}")
    arr = np.frombuffer(t.data, dtype=np_dtype).reshape(dims).astype(_DTYPES[t.dtype])
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise PayloadError("tensor contains NaN or infinite values")
    return arr


def control_to_payload(fields: Mapping[str, object]) -> Payload:
    return Payload(control=common_pb2.Control(fields={k: str(v) for k, v in fields.items()}))


def control_from_payload(payload: Payload, required: Sequence[str] = ()) -> dict[str, str]:
    if payload.WhichOneof("kind") != "control":
        raise PayloadError(f"expected a control payload, got '{payload.WhichOneof('kind')}'")
    fields = dict(payload.control.fields)
    missing = [k for k in required if k not in fields]
    if missing:
        raise PayloadError(f"control payload lacks fields {missing}")
    return fields


def layer_setup_to_payload(**step: Message) -> Payload:
    """One setup step of a source layer, e.g. `layer_setup_to_payload(matmul=MatMulSetup(...))`."""
    return Payload(layer_setup=common_pb2.LayerSetup(**step))


def layer_setup_from_payload(payload: Payload, step: str) -> Any:
    """The `step` message (e.g. "matmul", "embed_inputs") of a `LayerSetup` payload.

    Raises:
        PayloadError: not a layer-setup payload, or another setup step.
    """
    kind = payload.WhichOneof("kind")
    if kind != "layer_setup":
        raise PayloadError(f"expected a layer_setup payload ({step}), got '{kind}'")
    got = payload.layer_setup.WhichOneof("step")
    if got != step:
        raise PayloadError(f"expected the layer setup step '{step}', got '{got}'")
    return getattr(payload.layer_setup, step)


def indices_to_payload(indices: np.ndarray) -> Payload:
    data = np.ascontiguousarray(indices, dtype="<i8").tobytes()
    return Payload(indices=common_pb2.Indices(data=data))


def indices_from_payload(payload: Payload, upper: int) -> np.ndarray:
    """Decode row indices and check they lie in [0, upper)."""
    if payload.WhichOneof("kind") != "indices":
        raise PayloadError(f"expected an indices payload, got '{payload.WhichOneof('kind')}'")
    raw = payload.indices.data
    if len(raw) % 8:
        raise PayloadError(f"indices blob of {len(raw)} bytes is not a multiple of 8")
    idx = np.frombuffer(raw, dtype="<i8").astype(np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= upper):
        raise PayloadError(f"indices out of range [0, {upper})")
    return idx


MAX_ID_CHARS = 256  # longer ids are refused (a row id is a key, not data)


def ids_to_payload(ids: Sequence[str]) -> Payload:
    """The row ids of an online scoring batch."""
    return Payload(ids=common_pb2.Ids(values=list(ids)))


def ids_from_payload(payload: Payload, max_count: int) -> list[str]:
    """Decode row ids; at most `max_count`, each 1-256 characters.

    Raises:
        PayloadError: wrong payload kind, too many ids, or an empty or overlong id.
    """
    if payload.WhichOneof("kind") != "ids":
        raise PayloadError(f"expected an ids payload, got '{payload.WhichOneof('kind')}'")
    ids = list(payload.ids.values)
    if len(ids) > max_count:
        raise PayloadError(f"{len(ids)} ids in one batch; at most {max_count} are scored at once")
    if any(not 0 < len(i) <= MAX_ID_CHARS for i in ids):
        raise PayloadError(f"an id is empty or longer than {MAX_ID_CHARS} characters")
    return ids
