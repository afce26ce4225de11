"""Obfuscator pools: fixed-base tables (peer key and CRT) against full exponentiation."""

from __future__ import annotations

import time
from collections import Counter

import gmpy2
import pytest
from gmpy2 import mpz
from hypothesis import given, settings, strategies as st
from vfl.secure.config import SecureConfig
from vfl.secure.paillier.engine import Paillier
from vfl.secure.paillier.fixed_base import HIDING_BITS, MIN_POSITIONS, ObfuscatorTable, positions
from vfl.secure.paillier.gate import Gate
from vfl.secure.paillier.keys import generate_keypair
from vfl.secure.paillier.obfuscators import ObfuscatorPool
from vfl.secure.source_layers.crypto import PartyCrypto

from tests.support.secure import config_for_tests

plaintexts = st.integers(min_value=-(2**500), max_value=2**500)
scalars = st.integers(min_value=-(2**20), max_value=2**20)


@pytest.fixture(scope="module")
def owner(test_keys):
    """B's own context: decrypts; its pool samples from CRT tables."""
    key = test_keys["B"]
    pool = ObfuscatorPool(key.public, key.private, 0, 2, False, "fixed-base")
    pool.prepare()
    return Paillier(key.public, key.private, pool)


@pytest.fixture(scope="module")
def peer(test_keys):
    """A peer's context for B's key: no private key; its pool samples from n^2 tables."""
    key = test_keys["B"].public
    pool = ObfuscatorPool(key, None, 0, 2, False, "fixed-base")
    pool.prepare()
    return Paillier(key, None, pool)


@settings(max_examples=30, deadline=None)
@given(plaintexts)
def test_table_encryptions_decrypt(owner, peer, m):
    assert owner.decrypt(peer.encrypt([m]) + owner.encrypt([m])) == [m, m]


@settings(max_examples=25, deadline=None)
@given(plaintexts, plaintexts, scalars)
def test_sums_products_and_rerandomisation_of_table_ciphertexts(owner, peer, a, b, k):
    nsq = peer.pk.nsquare
    ca, cb = peer.encrypt([a]), owner.encrypt([b])
    assert owner.decrypt(peer.add(ca, cb)) == [a + b]
    assert owner.decrypt(peer.add_plain(ca, [b])) == [a + b]
    base = ca[0] if k >= 0 else gmpy2.invert(ca[0], nsq)
    power = gmpy2.powmod(base, abs(k), nsq)
    assert owner.decrypt([power]) == [a * k]
    fresh = peer.rerandomize(ca)
    assert fresh != ca and owner.decrypt(fresh) == [a]


def test_table_obfuscators_are_fresh_encryptions_of_zero(owner, peer):
    for pool in (owner.pool, peer.pool):
        values = pool.take(200)
        assert len(set(values)) == 200
        assert owner.decrypt(values) == [0] * 200
        assert pool.take(1) != pool.take(1)


def test_table_obfuscators_cover_every_legendre_class(owner, peer, test_keys):
    """A single fixed base h (obfuscators h^k) would confine the pair of Legendre symbols
    of r^n mod n to one coset, which the key owner reads; ours hit all four classes."""
    p, q = test_keys["B"].private.p, test_keys["B"].private.q
    for pool in (peer.pool, owner.pool):
        classes = Counter((gmpy2.legendre(s, p), gmpy2.legendre(s, q)) for s in pool.take(400))
        assert set(classes) == {(1, 1), (1, -1), (-1, 1), (-1, -1)}
        assert min(classes.values()) > 50  # 100 expected each
    h = peer.pool.take(1)[0]
    single = Counter(
        (gmpy2.legendre(x, p), gmpy2.legendre(x, q))
        for x in (gmpy2.powmod(h, k, peer.pk.nsquare) for k in range(1, 400))
    )
    assert len(single) <= 2  # powers of one base: {(1, 1), class of h}


def test_table_size_gives_the_stated_statistical_distance(test_keys):
    key = test_keys["B"]
    table = ObfuscatorTable.generate(key.public, None, 2)
    rows = positions(key.public.bits)
    assert 8 * rows >= key.public.bits + HIDING_BITS and rows >= MIN_POSITIONS
    assert table.multiplications == rows - 1
    own = ObfuscatorTable.generate(key.public, key.private, 2)
    assert own.multiplications == 2 * (positions(int(key.private.p.bit_length())) - 1)


def test_pools_use_tables_after_spending_their_cost_on_full_exponentiations(test_keys):
    key = test_keys["A1"]
    pool = ObfuscatorPool(key.public, None, 0, 2, False, "fixed-base")
    pool.compute(10)
    assert not pool.uses_table
    pool.compute(positions(key.public.bits))
    assert pool.uses_table
    full = ObfuscatorPool(key.public, None, 0, 2, False, "full")
    full.compute(2 * positions(key.public.bits))
    full.prepare()
    assert not full.uses_table


def test_helper_processes_share_requests_and_stop_on_close(test_keys):
    key = test_keys["B"]
    owner = Paillier(key.public, key.private)
    for private in (None, key.private):
        pool = ObfuscatorPool(key.public, private, 0, 2, False, "fixed-base", helpers=1)
        pool.prepare()
        assert pool.helpers_ready(timeout=60)
        worker = pool._helpers.workers[0]  # noqa: SLF001 - white-box: the helper is in use
        values = pool.compute(64)
        assert len(set(values)) == 64 and owner.decrypt(values) == [0] * 64
        pool.close()
        assert not worker._process.is_alive()  # noqa: SLF001


def test_a_dead_helper_process_falls_back_to_the_pool_itself(test_keys, caplog):
    key = test_keys["B"]
    pool = ObfuscatorPool(key.public, None, 0, 2, False, "fixed-base", helpers=1)
    pool.prepare()
    assert pool.helpers_ready(timeout=60)
    pool._helpers.workers[0]._process.kill()  # noqa: SLF001
    pool._helpers.workers[0]._process.join()  # noqa: SLF001
    values = pool.compute(16)
    assert len(set(values)) == 16 and "helper process failed" in caplog.text
    assert pool.compute(4) and not pool._helpers.workers  # noqa: SLF001
    pool.close()


def test_unknown_methods_are_rejected(test_keys):
    with pytest.raises(ValueError, match="unknown obfuscator method 'fast'"):
        ObfuscatorPool(test_keys["B"].public, method="fast")
    with pytest.raises(ValueError, match="obfuscator must be in"):
        SecureConfig(obfuscator="fast")


def wait_until(condition, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def test_background_refill_runs_only_while_the_gate_is_open(test_keys):
    key, gate = test_keys["B"], Gate()
    pool = ObfuscatorPool(key.public, key.private, 24, 2, True, "fixed-base", gate)
    pool.prepare()
    pool.refill_in_background()
    time.sleep(0.3)
    assert pool.ready == 0
    gate.open()
    assert wait_until(lambda: pool.ready == 24)
    pool.close()


def test_party_crypto_opens_the_gate_only_while_waiting(test_keys):
    config = config_for_tests(obfuscator_pool=16, background_refill=True)
    crypto = PartyCrypto("B", config, test_keys["B"], own_pool=True)
    peer = crypto.add_peer(test_keys["A1"].public)
    assert peer.pool.uses_table  # a peer's table: built at once
    time.sleep(0.2)
    assert peer.pool.ready == 0  # no wait yet: no refill
    with crypto.waiting():
        with crypto.waiting():
            pass
        assert wait_until(lambda: peer.pool.ready == 16)
        assert not crypto.own.pool.uses_table and crypto.own.pool.ready == 0  # never used
    crypto.own.encrypt([1])
    assert crypto.own.pool.uses_table  # its table: built at its first use
    with crypto.waiting():
        assert wait_until(lambda: crypto.own.pool.ready == 16)
    peer.pool.take(16)
    time.sleep(0.2)
    assert peer.pool.ready == 0  # waits are over: no refill
    crypto.close()


def test_a_restored_table_samples_what_the_saved_one_did(test_keys):
    key = test_keys["B"]
    owner = Paillier(key.public, key.private)
    for private in (None, key.private):
        saved = ObfuscatorPool(key.public, private, 0, 2, False, "fixed-base")
        saved.prepare()
        pool = ObfuscatorPool(key.public, private, 0, 2, False, "fixed-base")
        pool.restore(saved.bases)
        assert not pool.uses_table  # built at the first use, from the saved bases
        values = pool.compute(8)
        assert pool.uses_table and pool.bases == saved.bases
        assert len(set(values)) == 8 and owner.decrypt(values) == [0] * 8


def test_a_table_of_another_key_is_refused(test_keys):
    saved = ObfuscatorPool(test_keys["A1"].public, None, 0, 2, False, "fixed-base")
    saved.prepare()
    pool = ObfuscatorPool(test_keys["B"].public, test_keys["B"].private, 0, 2, False)
    with pytest.raises(ValueError, match="does not fit the key of 'B'"):
        pool.restore(saved.bases)
    with pytest.raises(ValueError, match="without a table"):
        saved.restore(saved.bases)


def test_party_crypto_restores_saved_tables_for_its_own_and_peer_keys(test_keys):
    # Prepare: a party that built both tables, and its saved state
    config = config_for_tests(obfuscator_pool=4, background_refill=False)
    first = PartyCrypto("B", config, test_keys["B"], own_pool=True)
    first.add_peer(test_keys["A1"].public)
    first.own.encrypt([1])
    saved = first.tables_state()
    # Execute
    second = PartyCrypto("B", config, test_keys["B"], own_pool=True)
    second.restore_tables(saved)
    peer = second.add_peer(test_keys["A1"].public)
    other = second.add_peer(test_keys["A2"].public)  # no table saved: a new one
    # Assert
    assert second.own.pool.bases == first.own.pool.bases
    assert peer.pool.bases == first.peers["A1"].pool.bases
    assert other.pool.uses_table and other.pool.bases != peer.pool.bases
    assert Paillier(test_keys["A1"].public, test_keys["A1"].private).decrypt(
        peer.encrypt([5, -6])
    ) == [5, -6]
    for crypto in (first, second):
        crypto.close()


def test_decryption_agrees_on_one_and_several_threads(test_keys):
    key = test_keys["B"]
    values = list(range(-20, 21))
    cts = Paillier(key.public).encrypt(values)
    for threads in (1, 2, 3):
        assert Paillier(key.public, key.private, threads=threads).decrypt(cts) == values
    assert Paillier(key.public, key.private, threads=2).decrypt([]) == []
    assert Paillier(key.public, key.private, threads=2).decrypt([mpz(1)]) == [0]


@pytest.mark.slow
def test_2048_bit_tables_encrypt_decrypt_and_cover_the_legendre_classes():
    config = SecureConfig(workers=1, obfuscator_pool=0, background_refill=False)
    key = generate_keypair("B", config)
    p, q = key.private.p, key.private.q
    assert key.public.bits == 2048 and p % 4 == 3 == q % 4 and gmpy2.gcd(p - 1, q - 1) == 2
    pools = [ObfuscatorPool(key.public, private, 0, 2, False) for private in (key.private, None)]
    short = ObfuscatorPool(key.public, key.private, 0, 2, False, short_exponent=True)
    for pool in [*pools, short]:
        pool.prepare()
    owner, peer = (
        Paillier(key.public, key.private, pools[0]),
        Paillier(key.public, None, pools[1]),
    )
    values = [0, 1, -1, 2**1000, -(2**1500), 12345]
    assert owner.decrypt(peer.encrypt(values)) == values == owner.decrypt(owner.encrypt(values))
    assert owner.decrypt(Paillier(key.public, key.private, short).encrypt(values)) == values
    for pool in pools:
        classes = {(gmpy2.legendre(s, p), gmpy2.legendre(s, q)) for s in pool.take(64)}
        assert len(classes) == 4
    # short exponents: powers of h_s = (-x^2)^n, so only the two classes of Jacobi symbol 1
    classes = {(gmpy2.legendre(s, p), gmpy2.legendre(s, q)) for s in short.take(64)}
    assert classes == {(1, 1), (-1, -1)}
