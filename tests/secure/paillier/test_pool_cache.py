"""Obfuscator pools kept across jobs (`PoolCache`): one pool per peer key, filled only
while its gate is open, least recently used closed first, and what `PartyCrypto` does
with them."""

from __future__ import annotations

import sys
import threading
import time
import traceback

from vfl.secure.executor import LocalExecutor
from vfl.secure.paillier.engine import Paillier
from vfl.secure.paillier.gate import Gate
from vfl.secure.paillier.obfuscators import ObfuscatorPool
from vfl.secure.paillier.pool_cache import PoolCache
from vfl.secure.source_layers.crypto import PartyCrypto

from tests.support.secure import config_for_tests


def _until(condition, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def _threads() -> str:
    """Every thread's stack, for a failure message (a stalled filler shows where)."""
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    return "\n".join(
        f"--- {names.get(ident, ident)}\n" + "".join(traceback.format_stack(frame))
        for ident, frame in sys._current_frames().items()
    )


def _make(key, capacity: int = 2):
    def make(gate: Gate) -> ObfuscatorPool:
        return ObfuscatorPool(key, None, capacity, 1, True, "fixed-base", gate)

    return make


def test_a_gate_opens_while_anyone_holds_it():
    gate = Gate()
    assert not gate.is_set() and not gate.wait(0.01)
    with gate.held():
        gate.open()
        assert gate.wait(0.01)
        gate.close()
        assert gate.is_set()
    assert not gate.is_set()
    gate.close()  # closing a closed gate keeps it closed, never "below closed"
    gate.open()
    assert gate.is_set()


def test_kept_pools_fill_beyond_their_job_capacity_only_while_the_party_idles(test_keys):
    cache = PoolCache(keys=2, ready=24)
    key = test_keys["B"].public
    try:
        pool = cache.pool(key, _make(key, capacity=4))
        assert cache.pool(key, _make(key)) is pool  # one pool per key
        pool.prepare()
        pool.take(1)  # in use: its own refill waits for the gate (a job's wait opens it)
        time.sleep(0.3)
        assert pool.ready == 0
        with cache.gate.held():  # a job waits for a peer: refill to the job capacity only
            assert _until(lambda: pool.ready >= 4)
            time.sleep(0.3)
            assert pool.ready < 8
        cache.set_idle(True)  # no job runs: fill up to `ready`
        assert _until(lambda: cache.ready_counts()["B"] >= 24)
        cache.set_idle(False)  # a job starts: filling stops at once
        before = pool.ready
        taken = pool.take(10)
        assert len(set(taken)) == 10 and pool.ready == before - 10
        time.sleep(0.3)
        assert pool.ready == before - 10
        cache.set_idle(True)
        assert _until(lambda: pool.ready >= 24)
    finally:
        cache.close()


def test_the_least_recently_used_pool_is_closed_first(test_keys):
    cache = PoolCache(keys=2, ready=4)
    a, b, c = (test_keys[name].public for name in ("A1", "B", "A2"))
    try:
        pool_a = cache.pool(a, _make(a))
        pool_b = cache.pool(b, _make(b))
        assert cache.pool(a, _make(a)) is pool_a  # a is now the most recent
        cache.pool(c, _make(c))
        assert sorted(cache.ready_counts()) == ["A1", "A2"] and len(cache) == 2
        assert cache.pool(b, _make(b)) is not pool_b  # b was dropped: a new pool
    finally:
        cache.close()


def test_party_crypto_keeps_peer_pools_across_jobs_and_closes_its_own(test_keys):
    executor = LocalExecutor(workers=1)
    executor.pools = PoolCache(keys=2, ready=16)
    config = config_for_tests(
        executor=executor, obfuscator_helpers=0, obfuscator_pool=8, background_refill=True
    )
    try:
        first = PartyCrypto("A1", config, test_keys["A1"], own_pool=True)
        peer = first.add_peer(test_keys["B"].public)
        bases = first.tables_state()
        first.close()
        executor.pools.set_idle(True)
        assert _until(lambda: executor.pools.ready_counts()["B"] >= 16)
        executor.pools.set_idle(False)  # a job runs: no refill but during its own waits
        time.sleep(0.3)  # a batch in flight when the gate closed lands
        second = PartyCrypto("A1", config, test_keys["A1"], own_pool=True)
        second.restore_tables(bases)
        again = second.add_peer(test_keys["B"].public)
        ready = again.pool.ready
        assert again.pool is peer.pool and ready >= 16  # warm for the next job
        b = test_keys["B"]
        owner = Paillier(b.public, b.private, ObfuscatorPool(b.public, b.private, 0, 1, False))
        assert owner.decrypt(again.encrypt([5, -7])) == [5, -7]
        assert again.pool.ready == ready - 2
        second.close()
    finally:
        executor.pools.close()


def test_the_filling_pauses_for_latency_bound_work_and_a_quiet_second_after(test_keys):
    cache = PoolCache(keys=1, ready=10_000)
    key = test_keys["B"].public
    try:
        pool = cache.pool(key, _make(key))
        cache.set_idle(True)
        assert _until(lambda: pool.ready > 0)
        with cache.foreground():  # an online scoring batch
            during = -1
            while during != pool.ready:  # a filling step in flight lands
                during = pool.ready
                time.sleep(0.2)
            time.sleep(0.3)
            assert pool.ready == during
        time.sleep(0.3)  # within the quiet second after it
        assert pool.ready == during
        assert _until(lambda: pool.ready > during), (
            f"no filling after the quiet second:\n{_threads()}"
        )
    finally:
        cache.close()
