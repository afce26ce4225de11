"""The Paillier engine, keys and the ciphertext wire form (phe is the oracle)."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest
from gmpy2 import mpz
from hypothesis import given, settings, strategies as st
from vfl.secure.config import SecureConfig
from vfl.secure.errors import PaillierKeyError, PayloadError
from vfl.secure.paillier.cipher_matrix import CipherMatrix
from vfl.secure.paillier.engine import Paillier
from vfl.secure.paillier.keys import PublicKey, generate_keypair, keypair_from_phe
from vfl.secure.paillier.obfuscators import ObfuscatorPool
from vfl.secure.wire.ciphertexts import ciphertexts_from_payload, ciphertexts_to_payload
from vfl.secure.wire.keys import public_key_from_payload, public_key_to_payload

from tests.support.secure import config_for_tests, phe_form

plaintexts = st.integers(min_value=-(2**500), max_value=2**500)


@pytest.fixture(scope="module")
def he(test_keys):
    key = test_keys["B"]
    return Paillier(key.public, key.private, ObfuscatorPool(key.public, key.private, 0, 2, False))


@pytest.fixture(scope="module")
def public_he(test_keys):
    return Paillier(test_keys["B"].public)


@settings(max_examples=40, deadline=None)
@given(plaintexts, plaintexts)
def test_decrypt_of_sum_of_encryptions_is_the_sum(he, public_he, a, b):
    assert he.decrypt(he.add(he.encrypt([a]), public_he.encrypt([b]))) == [a + b]


@settings(max_examples=25, deadline=None)
@given(plaintexts, plaintexts)
def test_plaintext_addition_negation_and_rerandomisation(he, public_he, a, b):
    c = public_he.encrypt([a])
    assert he.decrypt(public_he.add_plain(c, [b])) == [a + b]
    assert he.decrypt(public_he.negate(c)) == [-a]
    fresh = public_he.rerandomize(c)
    assert fresh != c and he.decrypt(fresh) == [a]


@settings(max_examples=25, deadline=None)
@given(plaintexts)
def test_agrees_with_phe_in_both_directions(he, test_keys, m):
    pk, sk = phe_form(test_keys["B"])
    n = int(pk.n)
    ours = he.encrypt([m])[0]
    assert to_signed_int(sk.raw_decrypt(int(ours)), n) == m
    theirs = mpz(pk.raw_encrypt(m % n))
    assert he.decrypt([theirs]) == [m]


def to_signed_int(value: int, n: int) -> int:
    return value - n if value > n // 2 else value


def test_obfuscators_are_fresh_encryptions_of_zero(he, test_keys):
    for private in (test_keys["B"].private, None):
        pool = ObfuscatorPool(
            test_keys["B"].public, private, capacity=6, threads=2, background=False
        )
        pool.fill()
        assert pool.ready == 6
        values = pool.take(4) + pool.take(4)  # 2 come from the pool's rest, 2 are computed
        assert pool.ready == 0 and len(set(values)) == 8
        assert he.decrypt(values) == [0] * 8


def test_decrypt_without_the_private_key_names_the_problem(public_he):
    with pytest.raises(PaillierKeyError, match="private key is not held here"):
        public_he.decrypt(public_he.encrypt([1]))


def test_keys_below_2048_bits_need_the_explicit_test_setting():
    with pytest.raises(PaillierKeyError, match="minimum is 2048"):
        SecureConfig(key_bits=1024)
    with pytest.raises(PaillierKeyError, match="minimum is 2048"):
        SecureConfig(key_bits=256, allow_insecure_test_keys=True)


def test_a_test_key_logs_a_warning_without_key_material(caplog, test_keys):
    caplog.set_level(logging.WARNING, logger="vfl.secure.paillier.keys")
    config = config_for_tests()
    keypair = generate_keypair("A9", replace(config, key_bits=512))
    assert "INSECURE 512-bit" in caplog.text
    assert str(keypair.private.p) not in caplog.text and "p=" not in repr(keypair.private)


def test_public_key_payload_round_trip_and_checks(test_keys):
    key = test_keys["A1"].public
    payload = public_key_to_payload(key)
    assert public_key_from_payload(payload, "A1", config_for_tests()).n == key.n
    with pytest.raises(PayloadError, match="expected 'B'"):
        public_key_from_payload(payload, "B", config_for_tests())
    with pytest.raises(PaillierKeyError, match="minimum is 2048"):
        public_key_from_payload(payload, "A1", SecureConfig())


def test_h_s_crosses_the_wire_and_a_malformed_one_is_refused(test_keys):
    key = test_keys["A1"].public
    back = public_key_from_payload(public_key_to_payload(key), "A1", config_for_tests())
    assert back.h_s == key.h_s and back.h_s is not None
    without = public_key_to_payload(PublicKey(key.n, "A1"))  # a key from before h_s existed
    assert public_key_from_payload(without, "A1", config_for_tests()).h_s is None
    for bad in (1, int(key.n) * 3, int(key.nsquare)):
        payload = public_key_to_payload(key)
        payload.public_key.h_s = bad.to_bytes((bad.bit_length() + 7) // 8, "big")
        with pytest.raises(PaillierKeyError, match="public key of 'A1' has a malformed h_s"):
            public_key_from_payload(payload, "A1", config_for_tests())
    payload.public_key.h_s = b"\x00"
    with pytest.raises(PaillierKeyError, match="malformed h_s"):
        public_key_from_payload(payload, "A1", config_for_tests())


def test_keypair_from_phe_checks_the_minimum(test_keys):
    pk, sk = phe_form(test_keys["B"])
    with pytest.raises(PaillierKeyError, match="minimum is 2048"):
        keypair_from_phe("B", pk, sk, SecureConfig())


@pytest.fixture()
def matrix(public_he):
    rows = [public_he.encrypt([1, 2, 3]), public_he.encrypt([4, 5, 6])]
    return CipherMatrix(rows, 3, public_he.pk, slots=15, scale_bits=20)


def decode(payload, key, shape=(2, 3), slots=15, scale_bits=20):
    return ciphertexts_from_payload(payload, key, shape=shape, slots=slots, scale_bits=scale_bits)


def test_ciphertexts_round_trip_as_one_fixed_width_blob(matrix):
    payload = ciphertexts_to_payload(matrix)
    assert len(payload.ciphertexts.blob) == 6 * matrix.key.width == 6 * 256
    assert decode(payload, matrix.key).rows == matrix.rows
    assert decode(payload, matrix.key, shape=(None, 3)).shape == (2, 3)


def test_ciphertexts_of_the_wrong_width_are_rejected(matrix, test_keys):
    payload = ciphertexts_to_payload(matrix)
    payload.ciphertexts.width = 128
    with pytest.raises(PayloadError, match="width 128 bytes does not match the 256 bytes"):
        decode(payload, matrix.key)


def test_ciphertexts_of_the_wrong_count_or_shape_are_rejected(matrix):
    payload = ciphertexts_to_payload(matrix)
    payload.ciphertexts.blob = payload.ciphertexts.blob[:-256]
    with pytest.raises(PayloadError, match="need 1536; the message is truncated"):
        decode(payload, matrix.key)
    with pytest.raises(PayloadError, match=r"expected ciphertexts of shape \[4, 3\]"):
        decode(ciphertexts_to_payload(matrix), matrix.key, shape=(4, 3))


def test_ciphertexts_under_another_key_are_rejected(matrix, test_keys):
    with pytest.raises(PayloadError, match="under the key of 'B', expected 'A1'"):
        decode(ciphertexts_to_payload(matrix), test_keys["A1"].public)


def test_ciphertexts_with_another_layout_or_value_range_are_rejected(matrix):
    with pytest.raises(PayloadError, match="SecureConfigs disagree"):
        decode(ciphertexts_to_payload(matrix), matrix.key, scale_bits=16)
    payload = ciphertexts_to_payload(matrix)
    payload.ciphertexts.blob = b"\xff" * len(payload.ciphertexts.blob)
    with pytest.raises(PayloadError, match="outside"):
        decode(payload, matrix.key)
    with pytest.raises(PayloadError, match="expected a ciphertexts payload"):
        decode(public_key_to_payload(matrix.key), matrix.key)
