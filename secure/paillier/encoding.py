"""Signed fixed-point encoding and the packing of many signed slots into one plaintext.

Fixed point: a real x is the integer round(x * 2^f); in Z_n it is that integer mod n, and
residues above n/2 read as negative.

Packing: a row of h integers v_0..v_{h-1} becomes ceil(h / slots) plaintexts, each
P = sum_i v_i * 2^(w*i) over its slots (w = slot width), an ordinary signed integer.
Packing is additive (P(u) + P(v) = P(u + v)) and commutes with integer scalars
(c * P(v) = P(c * v)), so one ciphertext multiplication serves a whole row.

Headroom rule: every value *read back* must satisfy |v_i| < 2^(w-1) in every slot; then
the borrow-propagating unpack recovers it exactly. Intermediate values never unpacked
(sums in flight, masked values) may exceed a slot, because the maps above are exact over
the integers (mod n). With a scale of 2^f, a slot of width w holds |x| < 2^(w-1-f).
The whole packed integer, plus any statistical mask of `stat_bits` on top, must stay
below n/2: slots * w + stat_bits + 1 <= key_bits - 2.
"""

from __future__ import annotations

import numpy as np
from vfl.secure.errors import ConfigError, EncodingError

_INT64_SAFE = 2.0**62


def encode(values: np.ndarray, scale_bits: int) -> np.ndarray:
    """round(values * 2^scale_bits) as int64.

    Raises:
        EncodingError: a value is NaN, infinite, or too large for 62 bits at this scale.
    """
    scaled = np.rint(np.asarray(values, dtype=np.float64) * 2.0**scale_bits)
    if not np.all(np.isfinite(scaled)):
        raise EncodingError("cannot encode NaN or infinite values; clean the input first")
    if scaled.size and np.max(np.abs(scaled)) >= _INT64_SAFE:
        raise EncodingError(
            f"value too large for fixed point at scale 2^{scale_bits}: "
            f"|x| must stay below 2^{62 - scale_bits}"
        )
    return scaled.astype(np.int64)


def decode(values: np.ndarray, scale_bits: int) -> np.ndarray:
    """Integers at scale 2^scale_bits back to float64."""
    return np.asarray(values, dtype=np.float64) * 2.0**-scale_bits


def to_signed(value: int, modulus: int) -> int:
    """The representative of `value` mod `modulus` in (-modulus/2, modulus/2]."""
    value %= modulus
    return value - modulus if value > modulus // 2 else value


class Packer:
    """Packs rows of h signed slot values into ceil(h / slots) plaintext integers."""

    def __init__(self, key_bits: int, slot_bits: int, stat_bits: int) -> None:
        """Raises:
        ConfigError: the key is too small for one slot plus `stat_bits` of mask.
        """
        self.slot_bits = slot_bits
        self.stat_bits = stat_bits
        self.slots = (key_bits - 3 - stat_bits) // slot_bits
        if self.slots < 1:
            raise ConfigError(
                f"a {key_bits}-bit key cannot hold one {slot_bits}-bit slot plus a "
                f"{stat_bits}-bit mask; use a larger key"
            )
        self.mask_bits = self.slots * slot_bits + stat_bits
        self._half = 1 << (slot_bits - 1)
        self._bias = sum(self._half << (slot_bits * i) for i in range(self.slots))

    def columns(self, width: int) -> int:
        """Plaintexts per row for `width` slot values."""
        return max(1, -(-width // self.slots))

    def pack(self, values: np.ndarray) -> list[list[int]]:
        """Rows of int64 slot values (rows x h) to rows of ceil(h/slots) integers.

        Raises:
            EncodingError: a value does not fit a signed slot.
        """
        rows, width = values.shape
        cols = self.columns(width)
        limit = self._half
        if values.size and (values.max() >= limit or values.min() < -limit):
            raise EncodingError(f"a value does not fit a signed {self.slot_bits}-bit slot")
        padded = np.zeros((rows, cols * self.slots), dtype=np.int64)
        padded[:, :width] = values
        biased = (padded.astype(np.uint64) + np.uint64(limit)).astype("<u8")
        bits = np.unpackbits(biased.view(np.uint8), bitorder="little").reshape(-1, 64)
        bits = bits[:, : self.slot_bits].reshape(rows * cols, self.slots * self.slot_bits)
        raw = np.packbits(bits, axis=1, bitorder="little")
        flat = [int.from_bytes(r.tobytes(), "little") - self._bias for r in raw]
        return [flat[i * cols : (i + 1) * cols] for i in range(rows)]

    def unpack(self, packed: list[list[int]], width: int) -> np.ndarray:
        """Signed integers (rows x cols) back to int64 slot values (rows x width).

        Raises:
            EncodingError: a packed value lies outside the range of its slots.
        """
        rows = len(packed)
        cols = self.columns(width)
        nbytes = (self.slots * self.slot_bits + 7) // 8 + 1
        raw = bytearray()
        top = 1 << (self.slots * self.slot_bits)
        for row in packed:
            for value in row:
                biased = int(value) + self._bias
                if not 0 <= biased < top:
                    raise EncodingError(
                        f"packed value overflows its {self.slots} slots of {self.slot_bits} "
                        "bits; reduce the scale or the magnitude of the values"
                    )
                raw += biased.to_bytes(nbytes, "little")
        bits = np.unpackbits(np.frombuffer(bytes(raw), dtype=np.uint8), bitorder="little")
        bits = bits.reshape(rows * cols, nbytes * 8)[:, : self.slots * self.slot_bits]
        full = np.zeros((rows * cols * self.slots, 64), dtype=np.uint8)
        full[:, : self.slot_bits] = bits.reshape(-1, self.slot_bits)
        words = np.packbits(full, axis=1, bitorder="little").view("<u8").reshape(-1)
        signed = (words - np.uint64(self._half)).astype(np.int64)
        return signed.reshape(rows, cols * self.slots)[:, :width]
