"""Integer helpers of the Embed-MatMul layer: wide slot layouts, field layouts, exact products.

The MatMul layer's `Packer` keeps slots within int64. The Embed-MatMul layer also needs
slots that hold a value *plus* a per-slot statistical mask (value bits + sigma + 2, about
104 bits), because the receiver of a masked message unpacks it slot by slot (to truncate
the fixed-point scale or to split it by field). These layouts work on Python integers:

    SlotLayout   rows of `width` values packed contiguously, `slots` per plaintext
    FieldLayout  the concatenated embeddings E = [Q_1[x_1] .. Q_F[x_F]] of one party,
                 packed so that a field never straddles two plaintexts unless it is
                 wider than one; every field's table rows are stored at the slot
                 positions they occupy in E, so a lookup is a product of ciphertexts

Packing is linear over the integers, so sums whose slots overflow (masked values in
flight) stay exact mod n; only values read back must fit their signed slot.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
from vfl.secure.errors import EncodingError, InputError


@dataclass(frozen=True)
class SlotLayout:
    """Rows of `width` signed integers, `slots` per plaintext, `slot_bits` per slot."""

    width: int
    slot_bits: int
    slots: int

    @property
    def cols(self) -> int:
        """Plaintexts per row."""
        return max(1, -(-self.width // self.slots))

    def pack(self, rows: Iterable[Sequence[int]]) -> list[list[int]]:
        """Rows of `width` integers (any size; overflow is exact mod n) to packed rows."""
        w, s = self.slot_bits, self.slots
        out = []
        for row in rows:
            values = [int(v) for v in row]
            out.append([_pack(values[c * s : (c + 1) * s], w) for c in range(self.cols)])
        return out

    def unpack(self, packed: Sequence[Sequence[int]]) -> list[list[int]]:
        """Signed packed integers back to rows of `width` slot values.

        Raises:
            EncodingError: a packed value lies outside the range of its signed slots.
        """
        out = []
        for row in packed:
            values: list[int] = []
            for c, value in enumerate(row):
                count = min(self.slots, self.width - c * self.slots)
                values.extend(_unpack(int(value), self.slot_bits, count))
            out.append(values[: self.width])
        return out


def _pack(values: Sequence[int], w: int) -> int:
    total = 0
    for j, v in enumerate(values):
        total += v << (w * j)
    return total


def _unpack(value: int, w: int, count: int) -> list[int]:
    half = 1 << (w - 1)
    bias = sum(half << (w * j) for j in range(count))
    biased = value + bias
    if not 0 <= biased < 1 << (w * count):
        raise EncodingError(
            f"a packed value overflows its {count} slots of {w} bits; a value or a mask "
            "exceeds the layout's headroom"
        )
    mask = (1 << w) - 1
    return [((biased >> (w * j)) & mask) - half for j in range(count)]


@dataclass(frozen=True)
class Segment:
    """Values lo..hi-1 of one field sit in plaintext `col` from slot `slot` on."""

    col: int
    slot: int
    lo: int
    hi: int


@dataclass(frozen=True)
class FieldLayout:
    """Positions of every field's `emb_dim` values in the packed embedding row E."""

    field_count: int
    emb_dim: int
    slot_bits: int
    slots: int
    segments: tuple[tuple[Segment, ...], ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        segments, col, slot = [], 0, 0
        for _ in range(self.field_count):
            if slot and slot + self.emb_dim > self.slots:  # start a field on a fresh plaintext
                col, slot = col + 1, 0
            parts, lo = [], 0
            while lo < self.emb_dim:
                if slot == self.slots:
                    col, slot = col + 1, 0
                hi = min(self.emb_dim, lo + self.slots - slot)
                parts.append(Segment(col, slot, lo, hi))
                slot += hi - lo
                lo = hi
            segments.append(tuple(parts))
        object.__setattr__(self, "segments", tuple(segments))

    @property
    def width(self) -> int:
        return self.field_count * self.emb_dim

    @property
    def cols(self) -> int:
        """Plaintexts per packed embedding row."""
        return max(seg.col for parts in self.segments for seg in parts) + 1

    def pack_segment(self, values: Sequence[int], seg: Segment) -> int:
        """One field's values lo..hi-1 (of its emb_dim) placed at the segment's slots."""
        return _pack([int(v) for v in values[seg.lo : seg.hi]], self.slot_bits) << (
            self.slot_bits * seg.slot
        )

    def unpack_segment(self, value: int, seg: Segment) -> list[int]:
        """The field values stored by `pack_segment` (a signed plaintext).

        Raises:
            EncodingError: a value lies outside the range of its signed slot.
        """
        return _unpack(int(value) >> (self.slot_bits * seg.slot), self.slot_bits, seg.hi - seg.lo)

    def pack(self, rows: Iterable[Sequence[int]]) -> list[list[int]]:
        """Rows of width F*k integers to rows of `cols` plaintexts."""
        k = self.emb_dim
        out = []
        for row in rows:
            values = [int(v) for v in row]
            packed = [0] * self.cols
            for f, parts in enumerate(self.segments):
                for seg in parts:
                    packed[seg.col] += self.pack_segment(values[f * k : (f + 1) * k], seg)
            out.append(packed)
        return out

    def unpack(self, packed: Sequence[Sequence[int]]) -> list[list[int]]:
        """Rows of signed packed plaintexts back to rows of F*k slot values.

        Raises:
            EncodingError: a packed value lies outside the range of its signed slots.
        """
        used = [0] * self.cols
        for parts in self.segments:
            for seg in parts:
                used[seg.col] = max(used[seg.col], seg.slot + seg.hi - seg.lo)
        out = []
        for row in packed:
            slots = [_unpack(int(v), self.slot_bits, used[c]) for c, v in enumerate(row)]
            values = []
            for parts in self.segments:
                for seg in parts:
                    values.extend(slots[seg.col][seg.slot : seg.slot + seg.hi - seg.lo])
            out.append(values)
        return out


def exact_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The exact integer product a @ b of int64 matrices, as an object array of ints.

    Each operand is split into 16-bit limbs; every limb product is an exact float64
    matrix product (|entries| < inner * 2^32 < 2^53), combined with Python integers.

    Raises:
        InputError: the inner dimension is 2^21 or more (limb products would round).
    """
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    if a.shape[1] >= 1 << 21:
        raise InputError("exact_matmul supports inner dimensions below 2^21")
    total = np.zeros((a.shape[0], b.shape[1]), dtype=object)
    for i, la in enumerate(_limbs(a)):
        for j, lb in enumerate(_limbs(b)):
            if la is None or lb is None:
                continue
            part = np.rint(la @ lb).astype(np.int64).astype(object)
            total = total + part * (1 << (16 * (i + j)))
    return total


def _limbs(x: np.ndarray) -> list[np.ndarray | None]:
    """x = sum_l limb_l * 2^(16 l), the top limb signed; all-zero limbs are None."""
    limbs = [(x >> (16 * i)) & 0xFFFF for i in range(3)] + [x >> 48]
    return [limb.astype(np.float64) if limb.any() else None for limb in limbs]


def uniform_ints(count: int, bits: int) -> list[int]:
    """`count` integers uniform in [0, 2^bits) from the OS CSPRNG."""
    nbytes = (bits + 7) // 8
    blob = secrets.token_bytes(count * nbytes)
    extra = nbytes * 8 - bits
    return [
        int.from_bytes(blob[i * nbytes : (i + 1) * nbytes], "big") >> extra for i in range(count)
    ]


def uniform_matrix(rows: int, cols: int, bits: int) -> np.ndarray:
    """rows x cols integers uniform in [0, 2^bits): int64 if bits <= 62, else object."""
    values = uniform_ints(rows * cols, bits)
    dtype = np.int64 if bits <= 62 else object
    return np.array(values, dtype=dtype).reshape(rows, cols)


def round_shift(values: np.ndarray, bits: int) -> np.ndarray:
    """round(values / 2^bits) of an integer array (halves round up), as Python ints."""
    half = (1 << bits) >> 1
    flat = [(int(v) + half) >> bits for v in np.asarray(values, dtype=object).ravel()]
    return np.array(flat, dtype=object).reshape(np.shape(values))
