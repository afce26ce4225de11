"""The checkpoint file format: a header, a SHA-256 of the body, and the body.

    b"VFLCKPT1" | sha256(body) (32 bytes) | body

The body is `torch.save` of plain values (tensors, numbers, strings, bytes, lists, dicts)
and is read back with `torch.load(weights_only=True)`, which refuses anything else: a
checkpoint file can never run code. numpy arrays, gmpy2 integers and ciphertext matrices
(e.g. the encrypted derivatives a blindfl passive party caches for CELU) are stored as
tagged tensors, bytes and plain fields (`to_storable` / `from_storable`). A file whose hash
does not match its body (a torn or edited write) is refused with a named error before it
is unpickled.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from gmpy2 import mpz
from vfl.party.errors import CheckpointError
from vfl.secure.paillier.cipher_matrix import CipherMatrix, join_blob, split_blob
from vfl.secure.paillier.keys import PublicKey

MAGIC = b"VFLCKPT1"
_HEAD = len(MAGIC) + 32


@dataclass(frozen=True)
class Checkpoint:
    """One party's state after `round` of job `job_id` under the spec `spec_hash`."""

    job_id: str
    spec_hash: str
    party_id: str
    round: int
    state: dict[str, Any]


def encode_checkpoint(ck: Checkpoint) -> bytes:
    body = io.BytesIO()
    torch.save(
        {
            "job_id": ck.job_id,
            "spec_hash": ck.spec_hash,
            "party_id": ck.party_id,
            "round": ck.round,
            "state": to_storable(ck.state),
        },
        body,
    )
    data = body.getvalue()
    return MAGIC + hashlib.sha256(data).digest() + data


def verify_checkpoint(data: bytes, where: str) -> bytes:
    """The body of checkpoint file `data`, once its header and hash are checked (nothing
    is unpickled: a quick check that a file is whole).

    Raises:
        CheckpointError: not a checkpoint, or its body does not match its hash (corrupt).
    """
    if len(data) < _HEAD or not data.startswith(MAGIC):
        raise CheckpointError(f"{where} is not a checkpoint file (bad header); it was not loaded")
    digest, body = data[len(MAGIC) : _HEAD], data[_HEAD:]
    if hashlib.sha256(body).digest() != digest:
        raise CheckpointError(
            f"{where} is corrupt (its content does not match its hash); it was not loaded"
        )
    return body


def decode_checkpoint(data: bytes, where: str) -> Checkpoint:
    """Raises:
    CheckpointError: not a checkpoint, or its body does not match its hash (corrupt).
    """
    body = verify_checkpoint(data, where)
    try:
        raw = torch.load(io.BytesIO(body), weights_only=True)
        return Checkpoint(
            str(raw["job_id"]),
            str(raw["spec_hash"]),
            str(raw["party_id"]),
            int(raw["round"]),
            from_storable(raw["state"]),
        )
    except Exception as exc:  # noqa: BLE001 - any unreadable body is a named refusal
        raise CheckpointError(f"{where} cannot be read ({exc}); it was not loaded") from None


def to_storable(value: Any) -> Any:
    """numpy arrays, gmpy2 integers and ciphertext matrices as tagged plain values; the
    rest as it is."""
    if isinstance(value, CipherMatrix):
        return {"__ciphertexts__": _cipher_fields(value)}
    if isinstance(value, np.ndarray):
        return {"__ndarray__": torch.from_numpy(np.ascontiguousarray(value).copy())}
    if isinstance(value, type(mpz(0))):
        return {"__mpz__": int(value).to_bytes((int(value).bit_length() + 8) // 8, "big")}
    if isinstance(value, dict):
        return {k: to_storable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(to_storable(v) for v in value)
    if isinstance(value, np.integer | np.floating):
        return value.item()
    return value


def from_storable(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"__ndarray__"}:
            return value["__ndarray__"].numpy()
        if set(value) == {"__mpz__"}:
            return mpz(int.from_bytes(value["__mpz__"], "big"))
        if set(value) == {"__ciphertexts__"}:
            return _cipher_matrix(value["__ciphertexts__"])
        return {k: from_storable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(from_storable(v) for v in value)
    return value


def _cipher_fields(matrix: CipherMatrix) -> dict[str, Any]:
    n = int(matrix.key.n)
    return {
        "n": n.to_bytes((n.bit_length() + 7) // 8, "big"),
        "owner": matrix.key_owner,
        "shape": list(matrix.shape),
        "slots": matrix.slots,
        "scale_bits": matrix.scale_bits,
        "blob": join_blob(matrix.rows, matrix.key),
    }


def _cipher_matrix(fields: dict[str, Any]) -> CipherMatrix:
    key = PublicKey(mpz(int.from_bytes(fields["n"], "big")), str(fields["owner"]))
    rows, cols = (int(d) for d in fields["shape"])
    values = split_blob(fields["blob"], key, cols) if cols else [[] for _ in range(rows)]
    if values is None or len(values) != rows:
        raise ValueError("a saved ciphertext matrix is corrupt")
    return CipherMatrix(values, cols, key, int(fields["slots"]), int(fields["scale_bits"]))
