"""`Layout`: how k values per row sit in plaintexts, and why no sum can wrap.

A row's k reals become signed fixed-point integers v = round(x 2^f) with |v| < 2^b (b =
`value_bits`, from the bound on |x| the active party declares), placed in slots of w bits:

    w = b + bitlen(rows) + 2

A sum over at most `rows` rows has |S| < 2^(b + bitlen(rows)) = 2^(w - 2), and the
difference of two such sums (histogram subtraction, cumulative sums minus their parent)
|D| < 2^(w - 1): every value ever read back fits its signed slot, so slots never borrow
into one another in a way the signed unpack cannot undo. One ciphertext holds `slots` =
min(k, capacity // w) values, P = sum_i v_i 2^(w i) with |P| < 2^(slots w - 1); a row
takes `parts` = ceil(k / slots) ciphertexts. Packing puts `per_cipher` = capacity //
(slots w) such units in one ciphertext, Q = sum_j P_j 2^(j slots w), |Q| < 2^(capacity -
1), and `capacity` is the key's signed plaintext range (`OuPublicKey.plaintext_bits`), so
nothing wraps modulo p either. `Layout.create` refuses (EncodingError) a layout where a
slot would not fit a plaintext or would pass 64 bits (sums are read back as int64), and
`encode` refuses a value beyond the declared bound.

The plaintexts are signed integers, negatives included as they are (taken mod p by the
encryption): no offset, so an empty bucket is 0 and buckets need no row counts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from vfl.secure.errors import EncodingError, InputError, PayloadError

MAX_SLOT_BITS = 64  # sums are read back as int64
MAX_SCALE_BITS = 52
MAX_VALUES = 4096  # values per row (a peer's layout beyond it is refused)


@dataclass(frozen=True)
class Layout:
    """The plaintext layout of one job's bucket sums (the active party chooses it).

    Attributes:
        values: k, values per row (trees: g and h, or two per class; WOE/IV: y and 1).
        scale_bits: f, the fixed-point scale 2^f of every value.
        value_bits: b, |round(x 2^f)| < 2^b for every value x.
        rows: the most rows one sum covers (the rows encrypted at once).
        capacity: signed plaintext bits of the key (`OuPublicKey.plaintext_bits`).
    """

    values: int
    scale_bits: int
    value_bits: int
    rows: int
    capacity: int
    slot_bits: int = field(init=False)
    slots: int = field(init=False)

    def __post_init__(self) -> None:
        """Raises:
        EncodingError: a sum's slot would not fit one plaintext, or would pass 64 bits.
        InputError: a field out of range.
        """
        for name in ("values", "value_bits", "rows", "capacity"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise InputError(f"layout {name} must be an integer >= 1")
        if self.values > MAX_VALUES:
            raise InputError(f"layout values must be at most {MAX_VALUES} per row")
        if not 0 <= self.scale_bits <= MAX_SCALE_BITS:
            raise InputError(f"layout scale_bits must be in [0, {MAX_SCALE_BITS}]")
        slot_bits = self.value_bits + self.rows.bit_length() + 2
        if slot_bits > min(MAX_SLOT_BITS, self.capacity):
            raise EncodingError(
                f"a sum of {self.rows} values of {self.value_bits} bits needs {slot_bits}-bit "
                f"slots, more than {min(MAX_SLOT_BITS, self.capacity)}: lower the scale "
                f"(2^{self.scale_bits}) or the bound of the values, or encrypt fewer rows"
            )
        object.__setattr__(self, "slot_bits", slot_bits)
        object.__setattr__(self, "slots", min(self.values, self.capacity // slot_bits))

    @classmethod
    def create(cls, values: int, rows: int, bound: float, scale_bits: int, capacity: int) -> Layout:
        """The layout for `rows` rows of `values` reals with |x| <= bound at scale 2^f.

        Raises:
            EncodingError: sums of that many rows at that scale cannot fit a slot.
            InputError: a non-positive or non-finite bound, or a field out of range.
        """
        if not (isinstance(bound, int | float) and math.isfinite(bound) and bound > 0):
            raise InputError(f"the bound of the values must be a positive number, got {bound}")
        if not 0 <= scale_bits <= MAX_SCALE_BITS:
            raise InputError(f"scale_bits must be in [0, {MAX_SCALE_BITS}]")
        largest = math.floor(bound * 2.0**scale_bits + 0.5)  # round half away, as np.rint at most
        return cls(values, scale_bits, max(1, int(largest).bit_length()), rows, capacity)

    @property
    def parts(self) -> int:
        """Ciphertexts per row (and per bucket)."""
        return -(-self.values // self.slots)

    @property
    def unit_bits(self) -> int:
        """Bits of one ciphertext's slots: a row part, or a bucket part."""
        return self.slots * self.slot_bits

    @property
    def per_cipher(self) -> int:
        """Bucket parts packed into one ciphertext."""
        return self.capacity // self.unit_bits

    @property
    def largest(self) -> int:
        """The largest |value| a row may carry, at scale 2^f."""
        return (1 << self.value_bits) - 1

    def packed_count(self, buckets: int) -> int:
        """Ciphertexts of `buckets` packed buckets."""
        return -(-buckets * self.parts // self.per_cipher)

    def scaled(self, values: np.ndarray) -> np.ndarray:
        """Rows of k reals (rows x k) as int64 at scale 2^f, checked against the layout.

        Raises:
            InputError: not a 2-D array of k columns, or more rows than the layout's.
            EncodingError: a NaN, an infinity, or a value beyond the layout's bound.
        """
        array = np.asarray(values, dtype=np.float64)
        if array.ndim != 2 or array.shape[1] != self.values:
            raise InputError(f"values must be a (rows, {self.values}) array, got {array.shape}")
        if array.shape[0] > self.rows:
            raise InputError(f"{array.shape[0]} rows, more than the layout's {self.rows}")
        if not np.all(np.isfinite(array)):
            raise EncodingError("cannot encrypt NaN or infinite values; clean them first")
        scaled = np.rint(array * 2.0**self.scale_bits)
        if scaled.size and np.max(np.abs(scaled)) > self.largest:
            raise EncodingError(
                f"a value exceeds the layout's bound ({self.largest} / 2^{self.scale_bits}): "
                "declare a larger bound when creating the layout"
            )
        return scaled.astype(np.int64)

    def encode(self, values: np.ndarray) -> list[int]:
        """Rows of k reals (rows x k) as rows x parts signed plaintexts, row-major.

        Raises:
            InputError: not a 2-D array of k columns, or more rows than the layout's.
            EncodingError: a NaN, an infinity, or a value beyond the layout's bound.
        """
        scaled = self.scaled(values)
        padded = np.zeros((scaled.shape[0], self.parts * self.slots), dtype=np.int64)
        padded[:, : self.values] = scaled
        columns = [padded[:, i].tolist() for i in range(padded.shape[1])]
        slots = self.slots
        parts = [self._combine(columns[j * slots : (j + 1) * slots]) for j in range(self.parts)]
        return [value for row in zip(*parts, strict=True) for value in row]

    def _combine(self, columns: list[list[int]]) -> list[int]:
        """sum_i columns[i] 2^(w i), row by row."""
        out = columns[0]
        for i, column in enumerate(columns[1:], start=1):
            shift = self.slot_bits * i
            out = [a + (b << shift) for a, b in zip(out, column, strict=True)]
        return out

    def decode(self, plaintexts: Sequence[int], units: int) -> np.ndarray:
        """The bucket sums (buckets x k, int64, at scale 2^f) of decrypted packed
        plaintexts holding `units` bucket parts.

        Raises:
            PayloadError: a plaintext holds more than its units' slots can (the
                ciphertexts are not bucket sums packed in this layout).
        """
        per, w = self.per_cipher, self.slot_bits
        slots_per = per * self.slots
        half, mask = 1 << (w - 1), (1 << w) - 1
        bias = sum(half << (w * i) for i in range(slots_per))
        out: list[int] = []
        for index, value in enumerate(plaintexts):
            used = min(per, units - index * per) * self.unit_bits
            if not -(1 << (used - 1)) <= value < 1 << (used - 1):
                raise PayloadError(
                    "a decrypted bucket sum lies outside what sums of this layout can be: "
                    "the peer's histogram is malformed"
                )
            biased = value + bias
            out.extend(((biased >> (w * i)) & mask) - half for i in range(slots_per))
        slots = np.asarray(out, dtype=np.int64).reshape(-1, self.slots)[:units]
        return slots.reshape(-1, self.parts * self.slots)[:, : self.values]
