"""The executor seam with its local engine: the block functions give what the in-process
Paillier code gives, and decryptions, products and re-randomisations spread over a real
process pool give the same integers (re-randomisations: the same plaintexts under fresh
randomness), with blocks sized by the per-operation cost model. (The Ray engine:
tests/e2e/test_ray_executor.py.)"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from collections import Counter
from multiprocessing.shared_memory import SharedMemory

import numpy as np
import pytest
import scipy.sparse as sp
from vfl.party.config import parse_party_config
from vfl.party.errors import ConfigError as PartyConfigError
from vfl.secure.errors import ConfigError, ExecutorError
from vfl.secure.executor import (
    DECRYPT,
    PRODUCT_TERM,
    RERANDOMIZE_FULL,
    RERANDOMIZE_TABLE,
    ComputeConfig,
    LocalExecutor,
    RayExecutor,
    Shared,
    make_executor,
    op_cost_ms,
)
from vfl.secure.paillier.blocks import (
    WorkerTable,
    blob,
    decrypt_block,
    plaintexts,
    rerandomize_block,
    rerandomize_table_block,
    unblob,
    width_of,
)
from vfl.secure.paillier.cipher_matmul import CipherMatmul
from vfl.secure.paillier.engine import Paillier
from vfl.secure.paillier.obfuscators import ObfuscatorPool

from tests.secure.source_layers.test_matmul_layer import check_training
from tests.support.matmul_layer import make_job
from tests.support.secure import TEST_KEY_BITS, config_for_tests

TASK_MS = 1.2  # the pool's min_task_ms: blocks of a few 1024-bit ciphertexts


@pytest.fixture(scope="module")
def he(test_keys):
    kp = test_keys["B"]
    return Paillier(kp.public, kp.private, threads=1)


@pytest.fixture(scope="module")
def pool():
    executor = CountingShares(workers=2, min_task_ms=TASK_MS)
    yield executor
    executor.close()


class CountingShares(LocalExecutor):
    """A local pool that counts the values it shares with its workers and its tasks by
    task function."""

    def __init__(self, workers: int, min_task_ms: float) -> None:
        super().__init__(workers, min_task_ms, spread_paillier=True)  # as a cluster
        self.shares = 0
        self.calls: Counter[str] = Counter()

    def share(self, value):
        self.shares += 1
        return super().share(value)

    def map(self, fn, shared, blocks):
        self.calls[fn.__name__] += len(blocks)
        return super().map(fn, shared, blocks)


def peer_context(owner, executor, method="fixed-base") -> Paillier:
    """A context for a peer's key (public key only) whose pool has nothing ready: every
    re-randomisation is a shortfall."""
    pool = ObfuscatorPool(owner.pk, None, 0, 1, False, method)
    if method == "fixed-base":
        pool.prepare()  # its table, as a peer pool has one from the job's start
    return Paillier(owner.pk, None, pool, threads=1, executor=executor)


def test_blocks_decrypt_and_rerandomize_like_the_engine(he) -> None:
    values = [0, 1, -1, 2**60, -(2**60), 12345]
    cts = he.encrypt(values)
    width = width_of(he.pk.nsquare)
    assert plaintexts(decrypt_block(he.sk, blob(cts, width)), he.pk.n) == values
    fresh = rerandomize_block(he.pk, blob(cts, width))
    assert len(fresh) == len(cts) * width
    again = [int.from_bytes(fresh[i : i + width], "big") for i in range(0, len(fresh), width)]
    assert set(again).isdisjoint(int(c) for c in cts)  # new randomness ...
    assert he.decrypt([type(cts[0])(c) for c in again]) == values  # ... same plaintexts


def test_decryption_on_a_process_pool_equals_the_threads(he, pool) -> None:
    per_task = pool.block_items(DECRYPT, TEST_KEY_BITS)
    assert per_task == 4  # 1.2 ms of 1024-bit decryptions
    values = list(range(-20, 21))
    cts = he.encrypt(values)
    spread = Paillier(he.pk, he.sk, he.pool, threads=1, executor=pool)
    before = pool.tasks
    assert spread.decrypt(cts) == he.decrypt(cts) == values
    assert pool.tasks - before == 2  # 41 ciphertexts, 2 slots of >= 4: two blocks
    assert spread.decrypt(cts[:7]) == values[:7]  # under two tasks' worth: in this process
    assert pool.tasks - before == 2


def test_products_on_a_process_pool_equal_the_in_process_ones(he, pool) -> None:
    per_task = pool.block_items(PRODUCT_TERM, TEST_KEY_BITS)
    assert per_task == 267  # the same 1.2 ms: 67x the decryptions' items
    rng = np.random.default_rng(1)
    exps = sp.random(5, 240, density=0.5, random_state=2, format="csr", dtype=np.float64)
    exps.data = rng.integers(-300, 300, size=exps.nnz).astype(np.float64)
    assert exps.nnz >= 2 * per_task
    rows = [he.encrypt([int(v), -int(v)]) for v in rng.integers(-99, 99, size=240)]
    nsq = he.pk.nsquare
    alone = CipherMatmul(workers=1).matmul(exps, rows, nsq, 2)
    before = pool.tasks
    spread = CipherMatmul(parallel_min_terms=1, executor=pool).matmul(exps, rows, nsq, 2)
    assert pool.tasks - before == 4  # 2 blocks x 2 columns
    assert [he.decrypt(r) for r in spread] == [he.decrypt(r) for r in alone]
    small = exps[:, :40]  # ~100 terms: under one task's worth, one block per column
    before = pool.tasks
    CipherMatmul(parallel_min_terms=1, executor=pool).matmul(small, rows[:40], nsq, 2)
    assert pool.tasks - before == 0  # one block each: in this process, no pool task


def test_a_large_shortfall_is_rerandomised_on_the_pool_from_the_table(he, pool) -> None:
    per_task = pool.block_items(RERANDOMIZE_TABLE, TEST_KEY_BITS)
    values = list(range(-3 * per_task, 3 * per_task))
    cts = he.encrypt(values)
    peer = peer_context(he, pool)
    tasks, shares = pool.tasks, pool.shares
    fresh = peer.rerandomize(cts)
    assert pool.tasks - tasks == 2  # 6 tasks' worth over 2 slots
    assert pool.shares - shares == 1  # the table, once
    assert set(fresh).isdisjoint(cts) and len(set(fresh)) == len(fresh)  # fresh randomness
    assert he.decrypt(fresh) == values  # same plaintexts: every sample is an n-th residue
    again = peer.rerandomize(fresh)
    assert pool.shares - shares == 1 and pool.tasks - tasks == 4  # the table is not resent
    assert he.decrypt(again) == values and set(again).isdisjoint(fresh)


def test_ready_obfuscators_go_first_and_a_small_shortfall_stays_here(he, pool) -> None:
    per_task = pool.block_items(RERANDOMIZE_TABLE, TEST_KEY_BITS)
    values = list(range(2 * per_task))
    cts = he.encrypt(values)
    peer = peer_context(he, pool)
    peer.pool._capacity = per_task + 1  # noqa: SLF001 - a pool with a few ready
    peer.pool.fill()
    before = pool.tasks
    fresh = peer.rerandomize(cts)  # short by per_task - 1: under two tasks' worth
    assert pool.tasks == before and peer.pool.ready == 0
    assert he.decrypt(fresh) == values and set(fresh).isdisjoint(cts)


def test_a_pool_without_a_table_has_full_obfuscators_made_on_the_pool(he, pool) -> None:
    per_task = pool.block_items(RERANDOMIZE_FULL, TEST_KEY_BITS)
    assert per_task < pool.block_items(RERANDOMIZE_TABLE, TEST_KEY_BITS)  # 6x the work each
    values = list(range(-per_task, per_task + 1))
    cts = he.encrypt(values)
    peer = peer_context(he, pool, method="full")
    tasks = pool.tasks
    fresh = peer.rerandomize(cts)
    assert pool.tasks - tasks == 2 and not peer.pool.uses_table
    assert he.decrypt(fresh) == values and set(fresh).isdisjoint(cts)


def test_without_an_executor_rerandomisation_stays_with_the_pool(he) -> None:
    peer = peer_context(he, None)
    cts = he.encrypt(list(range(40)))
    fresh = peer.rerandomize(cts)
    assert he.decrypt(fresh) == list(range(40)) and set(fresh).isdisjoint(cts)


def test_the_table_block_function_rerandomises_like_the_pool(he) -> None:
    table = peer_context(he, None).pool.worker_table(1)
    assert table is not None and table.shape[1:] == (256, width_of(he.pk.nsquare))
    assert not table.flags.writeable
    cts = he.encrypt([5, -5, 0])
    width = width_of(he.pk.nsquare)
    fresh = unblob(rerandomize_table_block(WorkerTable(he.pk, table), blob(cts, width)), width)
    assert he.decrypt(fresh) == [5, -5, 0] and set(fresh).isdisjoint(cts)
    owner = ObfuscatorPool(he.pk, he.sk, 0, 1, False)
    owner.prepare()
    assert owner.worker_table(1) is None  # CRT tables: workers make full r^n instead


def test_a_large_shared_array_goes_through_shared_memory_once(pool) -> None:
    array = np.arange(3 << 20, dtype=np.uint8)
    shared = pool.share(("label", array))
    label, handle = shared.value
    assert label == "label" and not isinstance(handle, np.ndarray)  # a handle, not 3 MiB
    assert pool.map(_sum_of, shared, [0, 1]) == [int(array.sum())] * 2  # read by workers
    assert pool.map(_sum_of, shared, [0]) == [int(array.sum())]  # in-process: the array
    name = handle.name
    del shared, handle
    gc.collect()
    with pytest.raises(FileNotFoundError):
        SharedMemory(name)  # released with its last reference
    small = pool.share(np.arange(10))
    assert isinstance(small, Shared) and isinstance(small.value, np.ndarray)


def test_a_full_dev_shm_sends_the_array_with_each_task(pool, monkeypatch, caplog) -> None:
    """A container's small /dev/shm (Docker's default is 64 MB): writing past a full tmpfs
    would kill the daemon, so the value goes with every task instead, with a warning."""
    real = os.statvfs("/dev/shm")
    full = os.statvfs_result((*real[:4], 0, *real[5:]))  # f_bavail 0
    monkeypatch.setattr(os, "statvfs", lambda path: full)
    array = np.arange(3 << 20, dtype=np.uint8)
    shared = pool.share(("label", array))
    assert shared.value[1] is array
    assert pool.map(_sum_of, shared, [0, 1]) == [int(array.sum())] * 2
    assert "no room in /dev/shm" in caplog.text


def _sum_of(value, _block) -> int:
    return int(value[1].sum())


@pytest.mark.parametrize(
    ("capacity", "task"), [(0, "rerandomize_block"), (1, "rerandomize_table_block")]
)
def test_a_matmul_layer_with_an_executor_trains_as_without(test_keys, capacity, task):
    """Both parties' pools have nothing ready (no refills): m1 and m2, re-randomised under
    the peer's key, go to the executor, as full r^n from a pool without a table
    (`obfuscator_pool` 0: the table does not pay yet) or as samples of the peer pool's
    table (a pool for repeated use builds it when the peer is added); training still
    tracks plaintext training. Tasks of 0.05 ms: a 16-row batch's few ciphertexts spread."""
    executor = CountingShares(workers=2, min_task_ms=0.05)
    executor.warm_up()  # the process pool exists before two party threads use it
    try:
        config = config_for_tests(executor=executor, obfuscator_pool=capacity, obfuscator_helpers=0)
        job = make_job(test_keys, k=1, h=5, config_a=config, config_b=config)
        check_training(job, False, 5)
    finally:
        executor.close()
    assert executor.calls[task] >= 6  # m1 and m2 of 3 steps, at least one task each
    assert executor.calls["decrypt_block"] >= 6  # and their decryptions


def test_one_setting_means_the_same_work_per_task_for_every_operation() -> None:
    executor = LocalExecutor(workers=1, min_task_ms=20)
    for op in (DECRYPT, PRODUCT_TERM, RERANDOMIZE_FULL, RERANDOMIZE_TABLE):
        items = executor.block_items(op, 2048)
        assert 20 <= items * op_cost_ms(op, 2048) < 20 + op_cost_ms(op, 2048)
    assert executor.block_items(DECRYPT, 2048) == 8  # a training batch's m1 spreads
    assert executor.block_items(PRODUCT_TERM, 2048) == 1_112
    assert executor.block_items(DECRYPT, 3072) < 8  # larger keys: fewer items per task


def test_compute_config_names_the_bad_field() -> None:
    with pytest.raises(ConfigError, match="compute.executor must be one of"):
        ComputeConfig(executor="spark")
    with pytest.raises(ConfigError, match="needs compute.address"):
        ComputeConfig(executor="ray")
    for bad in (0, -1, "20", True, float("nan"), 1e9):
        with pytest.raises(ConfigError, match="compute.min_task_ms must be a number"):
            ComputeConfig(min_task_ms=bad)
    assert isinstance(make_executor(ComputeConfig(workers=1)), LocalExecutor)


def test_party_config_reads_compute(tmp_path) -> None:
    config = parse_party_config({"party": "bank", "compute": {"min_task_ms": 50}}, tmp_path)
    assert config.compute == ComputeConfig(min_task_ms=50)
    with pytest.raises(PartyConfigError, match="min_block .* was replaced by compute.min_task"):
        parse_party_config({"party": "bank", "compute": {"min_block": 2000}}, tmp_path)
    assert parse_party_config({"party": "bank"}, tmp_path).compute == ComputeConfig()
    with pytest.raises(PartyConfigError, match=r"unknown field\(s\) \['cores'\] under 'compute'"):
        parse_party_config({"party": "bank", "compute": {"cores": 4}}, tmp_path)
    with pytest.raises(PartyConfigError, match="needs compute.address"):
        parse_party_config({"party": "bank", "compute": {"executor": "ray"}}, tmp_path)


def test_a_config_asking_for_ray_without_ray_says_how_to_install_it(tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` meets without Ray
    raw = {"party": "bank", "compute": {"executor": "ray", "address": "10.0.0.5:6379"}}
    with pytest.raises(PartyConfigError, match=r'pip install -e "\.\[ray\]"'):
        parse_party_config(raw, tmp_path)


def test_an_unreachable_cluster_is_a_named_error_at_once() -> None:
    pytest.importorskip("ray", reason='Ray is not installed (pip install -e ".[ray]")')
    with pytest.raises(ExecutorError, match="Ray cluster .* cannot be reached"):
        RayExecutor("127.0.0.1:1").connect()  # port 1: nothing listens


def test_nothing_imports_ray_unless_a_config_asks_for_it() -> None:
    code = (
        "import sys; sys.modules['ray'] = None\n"  # `import ray` would fail
        "import vfl.secure.executor, vfl.secure.source_layers.common\n"
        "import vfl.party.daemon, vfl.party.config\n"
        "from vfl.secure.executor import ComputeConfig, make_executor\n"
        "make_executor(ComputeConfig(workers=1)).close()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
