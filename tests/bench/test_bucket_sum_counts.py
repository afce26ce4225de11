"""bench/bucket_sum.py's floor counts against the kernel: one tree of a small shape through
the real kernel (in-process executors, INSECURE test key) counts what it does
(`OpCounts`), and `tree_counts`, which knows only the shape and the layout, must predict
it exactly (the bench checks the root's decrypted sums against numpy's as it runs)."""

from __future__ import annotations

import numpy as np
import pytest
from vfl.secure.executor import LocalExecutor
from vfl.secure.histograms import Bins, Layout
from vfl.secure.ou import generate_ou_keypair
from vfl.secure.paillier.counters import OpCounts

from tests.support.bench import bench_module


@pytest.fixture(scope="module")
def bucket_sum():
    yield from bench_module("bucket_sum")


@pytest.mark.parametrize("plain_subtraction", [False, True])
def test_the_floor_counts_what_the_kernel_does(bucket_sum, plain_subtraction) -> None:
    # Prepare: 3 columns of 8 bins over 600 rows: the root and depth-1 nodes sum in pairs
    shape = bucket_sum.Shape("small", 600, 3, 8, 3)
    keys = generate_ou_keypair("B", 1024, allow_insecure_test_keys=True)
    layout = Layout.create(2, shape.rows, 1.0, 24, keys.public.plaintext_bits)
    rng = np.random.default_rng(0)
    values = bucket_sum.gradients(shape.rows, rng)
    bins = Bins(rng.integers(0, 8, size=(shape.rows, 3)), (8, 8, 8))
    counts = OpCounts()
    executors = (LocalExecutor(workers=1), LocalExecutor(workers=1))
    # Execute
    seconds, cpu, sent = bucket_sum.run_tree(
        shape, keys, layout, values, bins, executors, counts, plain_subtraction
    )
    # Assert
    expected = bucket_sum.tree_counts(shape, layout, layout.capacity, plain_subtraction)
    done = counts.snapshot()
    assert done["encryptions"] == expected["encrypt"]["encrypt"] == 600
    sums = expected["root sums"]["add"] + expected["child sums"]["add"]
    packing = expected["pack"]["square"] + expected["pack"]["add"]
    assert done["products"] == sums + packing
    assert done["rerandomizations"] == expected["pack"]["rerandomize"]
    assert done["decryptions"] == expected["decrypt"]["decrypt"]
    assert set(seconds) == set(cpu) == set(bucket_sum.STEPS)
    assert sent["active -> passive"] > 600 * keys.public.width
