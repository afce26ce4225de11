"""Short-exponent obfuscators h_s^a (Damgard-Jurik-Nielsen) for the owner's fresh
encryptions: key structure, correctness, the fallback without h_s, and which pools use them.
Keys are the session's small TEST keys (1024 bits); the 2048-bit case is in
`test_obfuscators.py` (slow)."""

from __future__ import annotations

import secrets
from dataclasses import replace

import gmpy2
import pytest
from gmpy2 import mpz
from hypothesis import given, settings, strategies as st
from phe import paillier
from vfl.secure.config import SecureConfig
from vfl.secure.errors import ConfigError, PaillierKeyError
from vfl.secure.paillier.engine import Paillier
from vfl.secure.paillier.keys import PrivateKey, PublicKey, keypair_from_phe
from vfl.secure.paillier.obfuscators import ObfuscatorPool
from vfl.secure.paillier.short_exponent import ShortExponentTable, exponent_bits
from vfl.secure.source_layers.crypto import PartyCrypto

from tests.support.secure import TEST_KEY_BITS, config_for_tests

plaintexts = st.integers(min_value=-(2**500), max_value=2**500)


@pytest.fixture(scope="module", params=["fixed-base", "full"])
def owner(test_keys, request):
    """B's own context with a short-exponent pool (tables, or CRT exponentiations)."""
    key = test_keys["B"]
    pool = ObfuscatorPool(key.public, key.private, 0, 2, False, request.param, short_exponent=True)
    pool.prepare()
    return Paillier(key.public, key.private, pool)


def test_keys_have_the_djn_structure(test_keys):
    for key in test_keys.values():
        p, q, n = key.private.p, key.private.q, key.public.n
        assert p % 4 == 3 and q % 4 == 3 and gmpy2.gcd(p - 1, q - 1) == 2
        assert n.bit_length() == TEST_KEY_BITS and gmpy2.is_prime(p) and gmpy2.is_prime(q)
        h_s = key.public.h_s
        assert h_s is not None and key.private.is_nth_residue(h_s)
        assert Paillier(key.public, key.private).decrypt([h_s]) == [0]
        assert gmpy2.jacobi(h_s % n, n) == 1  # a power of -x^2, of Jacobi symbol 1


@settings(max_examples=30, deadline=None)
@given(plaintexts)
def test_short_exponent_encryptions_decrypt(owner, m):
    assert owner.pool.short_exponent
    assert owner.decrypt(owner.encrypt([m, -m, 0])) == [m, -m, 0]


def test_obfuscators_are_distinct_encryptions_of_zero_in_two_legendre_classes(owner):
    values = owner.pool.take(40)
    sk = owner.sk
    assert len(set(values)) == 40 and owner.decrypt(values) == [0] * 40
    classes = {(gmpy2.legendre(s, sk.p), gmpy2.legendre(s, sk.q)) for s in values}
    assert classes <= {(1, 1), (-1, -1)} and len(classes) == 2  # powers of h_s


def test_the_table_computes_h_s_to_the_exponent(test_keys):
    key = test_keys["A1"]
    table = ShortExponentTable(key.private)
    assert table.multiplications == 2 * (-(-(TEST_KEY_BITS // 2) // 8) - 1)
    for _ in range(5):
        a = secrets.randbits(exponent_bits(key.public.bits))
        assert table.power(a) == gmpy2.powmod(key.public.h_s, a, key.public.nsquare)
    assert exponent_bits(2048) == 1104


def test_a_key_without_h_s_falls_back_to_statistical_obfuscators(test_keys):
    config = config_for_tests()
    pk, sk = paillier.generate_paillier_keypair(n_length=TEST_KEY_BITS)
    plain = keypair_from_phe("B", pk, sk, config)
    assert plain.public.h_s is None
    with pytest.raises(ConfigError, match="key with h_s"):
        ObfuscatorPool(plain.public, plain.private, short_exponent=True)
    with pytest.raises(ConfigError, match="key owner's pool"):
        ObfuscatorPool(test_keys["B"].public, None, short_exponent=True)
    for own_pool in (True, False):
        crypto = PartyCrypto("B", config, plain, own_pool)
        assert not crypto.own.pool.short_exponent
        assert crypto.own.decrypt(crypto.own.encrypt([5, -7])) == [5, -7]
        crypto.close()


@pytest.mark.parametrize("own_pool", [True, False])
def test_only_the_own_key_pool_uses_short_exponents(test_keys, own_pool):
    for choice, short in (("short", True), ("statistical", False)):
        crypto = PartyCrypto(
            "B", config_for_tests(fresh_obfuscators=choice), test_keys["B"], own_pool
        )
        peer = crypto.add_peer(test_keys["A1"].public)
        assert crypto.own.pool.short_exponent is short and not peer.pool.short_exponent
        crypto.close()


def test_a_helper_process_samples_short_exponent_obfuscators(test_keys):
    key = test_keys["B"]
    pool = ObfuscatorPool(key.public, key.private, 0, 2, False, short_exponent=True, helpers=1)
    pool.prepare()
    assert pool.helpers_ready(timeout=60)
    values = pool.compute(16)
    sk = key.private
    assert len(set(values)) == 16 and all(sk.is_nth_residue(v) for v in values)
    assert all(gmpy2.jacobi(v % sk.public_key.n, sk.public_key.n) == 1 for v in values)
    pool.close()


def test_malformed_or_foreign_h_s_is_refused(test_keys):
    key = test_keys["B"]
    n = key.public.n
    for bad in (mpz(0), mpz(1), n, key.private.p * 5, key.public.nsquare + 2):
        with pytest.raises(PaillierKeyError, match="malformed h_s"):
            PublicKey(n, "B", bad)
    not_a_residue = replace(key.public, h_s=mpz(n + 2))
    with pytest.raises(PaillierKeyError, match="not an n-th residue"):
        PrivateKey(not_a_residue, key.private.p, key.private.q)


def test_the_config_names_the_choices():
    assert SecureConfig().fresh_obfuscators == "short"
    with pytest.raises(ConfigError, match="fresh_obfuscators must be in"):
        SecureConfig(fresh_obfuscators="djn")
