"""Unit and property tests of the workset table (docs/protocols.md §6)."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest
from hypothesis import given, settings, strategies as st
from vfl.celu.errors import CeluError, WorksetError
from vfl.celu.sampling import UniformSampler
from vfl.celu.workset import WorksetTable


def first(n: int) -> int:
    """A `pick` that always chooses the smallest eligible batch id."""
    return 0


def test_capacity_evicts_oldest_insertion() -> None:
    table = WorksetTable(workset=3, reuse=5)
    for batch_id in range(5):
        table.put(batch_id, f"act{batch_id}", f"dev{batch_id}", t=batch_id)
    assert table.batch_ids() == [2, 3, 4]
    assert len(table) == 3
    assert table.evictions()["capacity"] == 2


def test_reinsert_replaces_and_becomes_newest() -> None:
    table = WorksetTable(workset=3, reuse=5)
    for batch_id in (0, 1, 2):
        table.put(batch_id, None, None, t=batch_id)
    table.put(0, "new", "newdev", t=3)
    assert table.batch_ids() == [1, 2, 0]
    entry = table.get(0)
    assert entry is not None
    assert (entry.activation, entry.derivative, entry.cached_at, entry.num_used) == (
        "new",
        "newdev",
        3,
        1,
    )
    assert table.evictions()["replaced"] == 1


def test_entry_evicted_after_reuse_uses_counting_its_round() -> None:
    table = WorksetTable(workset=5, reuse=3)
    table.put(7, "a", "d", t=0)
    first_use = table.take(1, (), first)
    second_use = table.take(2, (), first)
    assert first_use is not None and second_use is not None
    assert (first_use.num_used, second_use.num_used) == (2, 3)
    assert 7 not in table
    assert table.take(3, (), first) is None
    assert table.evictions()["used_up"] == 1


def test_reuse_one_is_vanilla_and_stores_nothing() -> None:
    table = WorksetTable(workset=5, reuse=1)
    table.put(0, "a", "d", t=0)
    assert len(table) == 0
    assert table.take(1, (), first) is None


def test_staleness_bound_evicts_lazily() -> None:
    table = WorksetTable(workset=2, reuse=3)  # W*R = 6
    table.put(0, None, None, t=0)
    table.put(1, None, None, t=4)
    assert table.evict_stale(5) == []
    assert table.evict_stale(6) == [0]
    assert table.batch_ids() == [1]
    assert table.take(10, (), first) is None
    assert table.evictions()["stale"] == 2


def test_take_excludes_and_rejects_bad_pick() -> None:
    table = WorksetTable(workset=3, reuse=5)
    for batch_id in (4, 2, 9):
        table.put(batch_id, None, None, t=0)
    chosen = table.take(1, {2}, first)
    assert chosen is not None and chosen.batch_id == 4
    assert table.take(1, {2, 4, 9}, first) is None
    with pytest.raises(WorksetError, match="outside"):
        table.take(1, (), lambda n: n)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"workset": 0, "reuse": 5}, "workset"),
        ({"workset": 5, "reuse": 0}, "reuse"),
        ({"workset": True, "reuse": 5}, "workset"),
        ({"workset": 2.5, "reuse": 5}, "workset"),
    ],
)
def test_invalid_sizes_raise(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(WorksetError, match=match):
        WorksetTable(**kwargs)  # type: ignore[arg-type]


def test_invalid_put_arguments_raise_celu_errors() -> None:
    table = WorksetTable(workset=2, reuse=2)
    with pytest.raises(CeluError, match="batch_id"):
        table.put(-1, None, None, t=0)
    with pytest.raises(CeluError, match="t must"):
        table.put(0, None, None, t=-3)


def test_wait_for_put_wakes_on_insert() -> None:
    table = WorksetTable(workset=2, reuse=2)
    seen = table.version
    timer = threading.Timer(0.05, table.put, args=(1, None, None, 0))
    timer.start()
    assert table.wait_for_put(seen, timeout=5.0) == seen + 1
    timer.join()


def test_celu_imports_no_transport() -> None:
    code = (
        "import sys, vfl.celu.workset, vfl.celu.sampling, vfl.celu.weighting, "
        "vfl.celu.local_loop, vfl.celu.synth_ctr\n"
        "bad = [m for m in ('grpc', 'vfl.party', 'vfl.coordinator') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# A random interleaving of communication rounds ("put") and local updates ("sample").
_OPS = st.lists(
    st.one_of(st.tuples(st.just("put"), st.integers(0, 12)), st.just(("sample", 0))),
    max_size=120,
)


@settings(max_examples=150, deadline=None)
@given(
    workset=st.integers(1, 6),
    reuse=st.integers(1, 6),
    seed=st.integers(0, 2**32 - 1),
    ops=_OPS,
)
def test_table_and_sampler_invariants(
    workset: int, reuse: int, seed: int, ops: list[tuple[str, int]]
) -> None:
    table = WorksetTable(workset, reuse)
    sampler = UniformSampler(table, seed)
    t = 0
    sampled: list[int] = []
    uses: dict[tuple[int, int], int] = {}
    for op, batch_id in ops:
        if op == "put":
            table.put(batch_id, None, None, t)
            t += 1
        else:
            entry = sampler.sample(t)
            if entry is not None:
                # The staleness bound holds for every entry handed out.
                assert t - entry.cached_at < workset * reuse
                key = (entry.batch_id, entry.cached_at)
                uses[key] = uses.get(key, 0) + 1
                assert entry.num_used == uses[key] + 1
                sampled.append(entry.batch_id)
                t += 1
        assert len(table) <= workset
    # Each cached batch drives at most R updates: its round plus R-1 local reuses.
    assert all(n <= reuse - 1 for n in uses.values())
    # No batch id repeats within W-1 consecutive samples.
    window = workset - 1
    for i, batch_id in enumerate(sampled):
        assert batch_id not in sampled[max(0, i - window) : i]
