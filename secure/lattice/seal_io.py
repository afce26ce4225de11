"""SEAL objects to and from bytes and numpy arrays.

TenSEAL's binding of Microsoft SEAL (`tenseal.sealapi`) saves and loads its objects only
through file paths and reads coefficients one call at a time. This module gives it an
anonymous in-memory file (`memfd_create`, one per thread), so nothing touches a disk, and
reads and writes SEAL's own serialization format (SEAL 4: a 16-byte header, then the
object's members, zstd-compressed when SEAL saved them) with numpy.

    save(obj)                    -> bytes as SEAL writes them (compressed, seeded if fresh)
    load(obj, context, data)     fill `obj` from such bytes (SEAL validates them)
    plaintext_bytes(coeffs)      a Plaintext of these coefficients (uncompressed)
    ciphertext_bytes(...)        a two-polynomial Ciphertext of these RNS residues
    plaintext_coeffs(pt, n)      a Plaintext's coefficients as uint64
"""

from __future__ import annotations

import os
import struct
import threading
from typing import Any

import numpy as np
import zstandard
from vfl.secure.errors import PayloadError

MAGIC = 0xA15E
HEADER = struct.Struct("<HBBBBHQ")  # magic, header size, major, minor, compression, -, size
COMPR_NONE, COMPR_ZSTD = 0, 2
_ZSTD_LIMIT = 1 << 28  # no SEAL object of ours decompresses to more than 256 MiB


class _Buffer(threading.local):
    """This thread's in-memory file, reached by SEAL through /proc/self/fd."""

    def __init__(self) -> None:
        self.fd = os.memfd_create("vfl-seal", os.MFD_CLOEXEC)
        self.path = f"/proc/self/fd/{self.fd}"


_BUFFER = _Buffer()


def save(obj: Any) -> bytes:
    """The bytes SEAL writes for `obj` (a Plaintext, Ciphertext, key or Serializable)."""
    obj.save(_BUFFER.path)
    return os.pread(_BUFFER.fd, os.fstat(_BUFFER.fd).st_size, 0)


def load(obj: Any, context: Any, data: bytes) -> None:
    """Fill `obj` from `data` as SEAL validates it against `context`.

    Raises:
        PayloadError: SEAL refuses the bytes (corrupt, or made with other parameters).
    """
    os.ftruncate(_BUFFER.fd, 0)
    os.pwrite(_BUFFER.fd, data, 0)
    try:
        obj.load(context, _BUFFER.path)
    except Exception as exc:  # the binding raises RuntimeError/ValueError/TypeError
        raise PayloadError(f"not a SEAL object for these parameters: {exc}") from exc


def version(template: bytes) -> tuple[int, int]:
    """SEAL's serialization version, read from bytes it wrote."""
    magic, _, major, minor, _, _, _ = HEADER.unpack_from(template)
    if magic != MAGIC:
        raise PayloadError("not a SEAL object (bad magic)")
    return major, minor


def body(data: bytes) -> bytes:
    """The members of a serialized object, decompressed.

    Raises:
        PayloadError: not a SEAL object, or a compression this module cannot read.
    """
    if len(data) < HEADER.size:
        raise PayloadError("not a SEAL object (too short)")
    magic, size, _, _, compression, _, total = HEADER.unpack_from(data)
    if magic != MAGIC or size != HEADER.size or total != len(data):
        raise PayloadError("not a SEAL object (bad header)")
    if compression == COMPR_NONE:
        return data[HEADER.size :]
    if compression == COMPR_ZSTD:
        reader = zstandard.ZstdDecompressor()
        return reader.decompress(data[HEADER.size :], max_output_size=_ZSTD_LIMIT)
    raise PayloadError(f"SEAL compression mode {compression} is not supported")


def _header(ver: tuple[int, int], total: int) -> bytes:
    return HEADER.pack(MAGIC, HEADER.size, ver[0], ver[1], COMPR_NONE, 0, total)


def _dyn_array(ver: tuple[int, int], values: np.ndarray) -> bytes:
    raw = np.ascontiguousarray(values, dtype="<u8").tobytes()
    return _header(ver, HEADER.size + 8 + len(raw)) + struct.pack("<Q", values.size) + raw


def plaintext_bytes(ver: tuple[int, int], coeffs: np.ndarray) -> bytes:
    """An uncompressed Plaintext of `coeffs` (uint64, each below the plain modulus)."""
    members = b"\0" * 32 + struct.pack("<Qd", coeffs.size, 1.0) + _dyn_array(ver, coeffs)
    return _header(ver, HEADER.size + len(members)) + members


def ciphertext_bytes(ver: tuple[int, int], parms_id: list[int], polys: np.ndarray) -> bytes:
    """An uncompressed Ciphertext of RNS residues `polys` (size x primes x degree)."""
    size, primes, degree = polys.shape
    members = (
        struct.pack("<4Q", *parms_id)
        + struct.pack("<BQQQdQ", 0, size, degree, primes, 1.0, 1)
        + _dyn_array(ver, polys.reshape(-1))
    )
    return _header(ver, HEADER.size + len(members)) + members


_PLAIN_DATA = 32 + 16 + HEADER.size + 8  # parms_id, count and scale, array header, size


def plaintext_coeffs(plain: Any, degree: int) -> np.ndarray:
    """The coefficients of a Plaintext as uint64, zero-padded to `degree`."""
    members = body(save(plain))
    (count,) = struct.unpack_from("<Q", members, 32)
    values = np.frombuffer(members, dtype="<u8", count=count, offset=_PLAIN_DATA)
    out = np.zeros(degree, dtype=np.uint64)
    out[:count] = values
    return out
