"""The kernel on a party's executor (a real local process pool): encryption, bucket sums,
packing and decryption split into tasks give the sums the in-process path gives."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from vfl.secure.executor import OU_ENCRYPT, OU_PRODUCT, LocalExecutor, op_cost_ms
from vfl.secure.histograms import BucketSummer, Layout, decrypt, encrypt_rows, pack, subtract
from vfl.secure.paillier.counters import OpCounts

from tests.secure.histograms.support import grid_values, plain_sums, random_bins

ROWS = 300


class CountingTasks(LocalExecutor):
    """Two worker processes, spreading decryptions as a cluster would, counting the
    tasks of each function and the values shared."""

    def __init__(self) -> None:
        super().__init__(workers=2, min_task_ms=0.05, spread_paillier=True)
        self.calls: Counter[str] = Counter()
        self.shares = 0

    def share(self, value):
        self.shares += 1
        return super().share(value)

    def map(self, fn, shared, blocks):
        self.calls[fn.__name__] += len(blocks)
        return super().map(fn, shared, blocks)


@pytest.fixture(scope="module")
def pool():
    executor = CountingTasks()
    yield executor
    executor.close()


def test_every_step_on_the_executor_gives_the_in_process_sums(ou_test_key, pool) -> None:
    # Prepare
    rng = np.random.default_rng(30)
    layout = Layout.create(4, ROWS, 1.0, 20, ou_test_key.public.plaintext_bits)
    values = grid_values(rng, ROWS, layout)
    bins = random_bins(rng, ROWS, (16, 5, 9))
    select = rng.choice(ROWS, 180, replace=False)
    counts = OpCounts()
    # Execute
    rows = encrypt_rows(values, ou_test_key.private, layout, pool, counts)
    summer = BucketSummer(rows, bins, pool, counts)
    node = summer.sums(select)
    sibling = subtract(summer.sums(), node)
    packed = pack(sibling, executor=pool, counts=counts)
    got = decrypt(packed, ou_test_key.private, executor=pool, counts=counts)
    # Assert
    rest = np.setdiff1d(np.arange(ROWS), select)
    assert np.array_equal(got, plain_sums(values, bins, rest))
    assert np.array_equal(
        decrypt(pack(node), ou_test_key.private), plain_sums(values, bins, select)
    )
    for task in ("encrypt_block", "sum_block", "pack_block", "decrypt_block"):
        assert pool.calls[task] >= 2, task
    assert pool.shares == 4  # the key; the rows and bins, once for both sums; packing; decryption
    # a level's nodes in one round of tasks, each too small for two tasks of its own
    before = pool.calls["sum_block"]
    nodes = np.array_split(rng.permutation(ROWS), 6)
    level = summer.sums_each(nodes)
    assert pool.calls["sum_block"] - before == 6
    for node_rows, sums in zip(nodes, level, strict=True):
        got = decrypt(pack(sums), ou_test_key.private)
        assert np.array_equal(got, plain_sums(values, bins, node_rows))
    snapshot = counts.snapshot()
    assert snapshot["encryptions"] == ROWS * layout.parts
    assert snapshot["products"] >= (180 + ROWS) * 3 * layout.parts
    assert snapshot["decryptions"] == len(packed.ciphertexts) == snapshot["rerandomizations"]


def test_small_work_stays_in_process() -> None:
    executor = LocalExecutor(workers=2, min_task_ms=20)
    assert executor.block_items(OU_ENCRYPT, 2048) * op_cost_ms(OU_ENCRYPT, 2048) >= 20
    assert executor.block_items(OU_PRODUCT, 2048) > executor.block_items(OU_ENCRYPT, 2048)
    executor.close()
