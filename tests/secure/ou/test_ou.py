"""Okamoto-Uchiyama keys, encryption, decryption, re-randomisation and the key's wire form."""

from __future__ import annotations

import logging

import gmpy2
import pytest
from gmpy2 import mpz
from hypothesis import given, settings, strategies as st
from vfl.secure.config import SecureConfig
from vfl.secure.errors import EncodingError, OuKeyError, PayloadError
from vfl.secure.ou.cipher import OwnerEncryptor, Rerandomizer, decrypt
from vfl.secure.ou.keys import (
    OuPrivateKey,
    OuPublicKey,
    factor_bits,
    generate_ou_keypair,
    prime_bits,
)
from vfl.secure.paillier.keys import generate_keypair
from vfl.secure.wire.keys import (
    ou_public_key_from_payload,
    ou_public_key_to_payload,
    public_key_from_payload,
    public_key_to_payload,
)

from tests.support.secure import TEST_KEY_BITS, config_for_tests

BITS = 200  # the plaintexts of these tests: |m| < 2^199
plaintexts = st.integers(min_value=-(2 ** (BITS - 1)) + 1, max_value=2 ** (BITS - 1) - 1)


@pytest.fixture(scope="module")
def encryptor(ou_test_key) -> OwnerEncryptor:
    return OwnerEncryptor(ou_test_key.private, BITS)


def check_sizes(private: OuPrivateKey, bits: int) -> None:
    p, q, t = private.p, private.q, private.t
    n = private.public_key.n
    assert n == p * p * q and n.bit_length() == bits
    assert p.bit_length() == prime_bits(bits) and t.bit_length() == factor_bits(bits)
    assert all(gmpy2.is_prime(x) for x in (p, q, t))
    assert (p - 1) % t == 0 and gmpy2.is_prime((q - 1) // 2) and (q - 1) % t != 0
    assert private.public_key.h == gmpy2.powmod(private.public_key.g, n, n)


def test_a_test_key_has_the_sizes_and_structure_the_scheme_needs(ou_test_key) -> None:
    check_sizes(ou_test_key.private, TEST_KEY_BITS)
    assert ou_test_key.public.plaintext_bits == prime_bits(TEST_KEY_BITS) - 1
    assert "p=" not in repr(ou_test_key.private) and str(ou_test_key.private.p) not in repr(
        ou_test_key.private
    )


@settings(max_examples=40, deadline=None)
@given(plaintexts, plaintexts)
def test_decrypt_of_product_of_encryptions_is_the_sum(ou_test_key, encryptor, a, b) -> None:
    ca, cb = encryptor.encrypt([a, b])
    assert decrypt(ou_test_key.private, [ca, cb, ca * cb % ou_test_key.public.n]) == [a, b, a + b]


def test_the_extremes_of_the_signed_range_decrypt_and_beyond_is_refused(
    ou_test_key, encryptor
) -> None:
    top = 2 ** (BITS - 1) - 1
    values = [top, -top, 0, -1, 1]
    assert decrypt(ou_test_key.private, encryptor.encrypt(values), threads=2) == values
    with pytest.raises(EncodingError, match="signed range"):
        encryptor.encrypt([top + 1])


def test_encryptions_are_fresh_and_rerandomisation_keeps_the_plaintext(
    ou_test_key, encryptor
) -> None:
    first, second = encryptor.encrypt([5, 5])
    assert first != second
    again = Rerandomizer(ou_test_key.public).apply([first, first])
    assert len({first, *again}) == 3
    assert decrypt(ou_test_key.private, again) == [5, 5]


def test_a_value_that_is_no_ciphertext_of_the_key_is_refused(ou_test_key) -> None:
    with pytest.raises(PayloadError, match="not a ciphertext under the key of 'B'"):
        decrypt(ou_test_key.private, [ou_test_key.public.n - 1])


def test_a_sum_up_to_the_key_capacity_decrypts_signed(ou_test_key) -> None:
    bits = ou_test_key.public.plaintext_bits
    wide = OwnerEncryptor(ou_test_key.private, bits)
    top = 2 ** (bits - 1) - 1
    assert decrypt(ou_test_key.private, wide.encrypt([top, -top])) == [top, -top]


def test_keys_below_the_minimum_or_malformed_are_refused(ou_test_key) -> None:
    with pytest.raises(OuKeyError, match="minimum is 2048"):
        generate_ou_keypair("B", TEST_KEY_BITS)
    key = ou_test_key.public
    with pytest.raises(OuKeyError, match="odd modulus"):
        OuPublicKey(key.n + 1, key.g, key.h, "B")
    with pytest.raises(OuKeyError, match="malformed G"):
        OuPublicKey(key.n, mpz(1), key.h, "B")
    private = ou_test_key.private
    with pytest.raises(OuKeyError, match="does not match"):
        OuPrivateKey(key, private.q, private.p, private.t)
    with pytest.raises(OuKeyError, match="do not fit"):
        OuPrivateKey(OuPublicKey(key.n, key.g, key.g, "B"), private.p, private.q, private.t)


def test_a_test_key_is_logged_as_insecure(caplog) -> None:
    with caplog.at_level(logging.WARNING):
        generate_ou_keypair("A1", 768, allow_insecure_test_keys=True)
    assert "INSECURE 768-bit Okamoto-Uchiyama" in caplog.text


def test_the_public_key_crosses_the_wire_and_schemes_are_not_confused(ou_test_key) -> None:
    payload = ou_public_key_to_payload(ou_test_key.public)
    assert ou_public_key_from_payload(payload, "B", allow_insecure_test_keys=True) == (
        ou_test_key.public
    )
    with pytest.raises(OuKeyError, match="minimum is 2048"):
        ou_public_key_from_payload(payload, "B")
    with pytest.raises(PayloadError, match="expected 'A1'"):
        ou_public_key_from_payload(payload, "A1", allow_insecure_test_keys=True)
    config = config_for_tests()
    with pytest.raises(PayloadError, match="scheme Okamoto-Uchiyama, expected Paillier"):
        public_key_from_payload(payload, "B", config)
    paillier = public_key_to_payload(generate_keypair("B", config).public)
    with pytest.raises(PayloadError, match="scheme Paillier, expected Okamoto-Uchiyama"):
        ou_public_key_from_payload(paillier, "B", allow_insecure_test_keys=True)
    payload.public_key.g = b"\x01"
    with pytest.raises(OuKeyError, match="malformed G"):
        ou_public_key_from_payload(payload, "B", allow_insecure_test_keys=True)


@pytest.mark.slow
@pytest.mark.parametrize("bits", [2048, 3072])
def test_full_size_keys_have_the_published_sizes_and_decrypt(bits) -> None:
    keys = generate_ou_keypair("B", bits)
    check_sizes(keys.private, bits)
    assert factor_bits(bits) == {2048: 224, 3072: 256}[bits]
    assert keys.public.plaintext_bits == {2048: 682, 3072: 1023}[bits]
    values = [2**120 - 1, -(2**120) + 1, 7]
    cts = OwnerEncryptor(keys.private, 122).encrypt(values)
    assert decrypt(keys.private, Rerandomizer(keys.public).apply(cts)) == values
    assert SecureConfig().key_bits == 2048
