"""Fixed-point encoding and slot packing: pure property tests."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp
from vfl.secure.paillier.encoding import Packer, decode, encode, to_signed

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@settings(deadline=None)
@given(hnp.arrays(np.float64, st.integers(1, 20), elements=finite), st.integers(0, 30))
def test_decode_encode_is_within_half_a_step(values, bits):
    decoded = decode(encode(values, bits), bits)
    assert np.all(np.abs(decoded - values) <= 2.0 ** -(bits + 1) + 1e-9 * np.abs(values))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, 2.0**50])
def test_encode_rejects_non_finite_and_too_large(bad):
    with pytest.raises(ValueError, match="NaN|too large"):
        encode(np.array([1.0, bad]), 16)


@settings(deadline=None)
@given(st.integers(), st.integers(3, 2**80))
def test_to_signed_is_the_centred_representative(value, modulus):
    signed = to_signed(value, modulus)
    assert (signed - value) % modulus == 0
    assert -modulus / 2 < signed <= modulus / 2


@st.composite
def packed_rows(draw):
    slot_bits = draw(st.sampled_from([8, 17, 62, 64]))
    width = draw(st.integers(1, 40))
    rows = draw(st.integers(1, 4))
    half = 1 << (slot_bits - 1)
    values = draw(hnp.arrays(np.int64, (rows, width), elements=st.integers(-half, half - 1)))
    return Packer(1024, slot_bits, 40), values


@settings(max_examples=60, deadline=None)
@given(packed_rows())
def test_pack_unpack_round_trip_with_negative_slots(case):
    packer, values = case
    packed = packer.pack(values)
    assert len(packed[0]) == packer.columns(values.shape[1])
    np.testing.assert_array_equal(packer.unpack(packed, values.shape[1]), values)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_packing_is_additive_and_commutes_with_scalars(data):
    packer = Packer(1024, 62, 40)
    width = data.draw(st.integers(1, 30))
    small = st.integers(-(2**40), 2**40)
    a = data.draw(hnp.arrays(np.int64, (2, width), elements=small))
    b = data.draw(hnp.arrays(np.int64, (2, width), elements=small))
    scalar = data.draw(st.integers(-(2**16), 2**16))
    pa, pb = packer.pack(a), packer.pack(b)
    summed = [[x + y for x, y in zip(ra, rb, strict=True)] for ra, rb in zip(pa, pb, strict=True)]
    scaled = [[scalar * x for x in row] for row in pa]
    np.testing.assert_array_equal(packer.unpack(summed, width), a + b)
    np.testing.assert_array_equal(packer.unpack(scaled, width), scalar * a)


def test_slot_layout_of_a_2048_bit_key():
    packer = Packer(2048, 62, 40)
    assert packer.slots == 32
    assert packer.mask_bits + 1 <= 2048 - 2


def test_pack_rejects_values_outside_a_slot():
    packer = Packer(1024, 16, 40)
    with pytest.raises(ValueError, match="does not fit"):
        packer.pack(np.array([[1 << 15]]))


def test_unpack_rejects_an_overflowed_plaintext():
    packer = Packer(1024, 16, 40)
    with pytest.raises(ValueError, match="overflows"):
        packer.unpack([[1 << (16 * packer.slots + 3)]], 2)


def test_packer_needs_room_for_one_slot_and_the_mask():
    with pytest.raises(ValueError, match="use a larger key"):
        Packer(64, 62, 40)
