"""Tests of uniform sampling from the workset table (docs/protocols.md §6)."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings, strategies as st
from vfl.celu.errors import WorksetError
from vfl.celu.sampling import UniformSampler
from vfl.celu.workset import WorksetTable


def draw_sequence(seed: int, draws: int = 40) -> list[int]:
    """Keep 4 batches cached with plenty of reuse and record the sampled ids."""
    table = WorksetTable(workset=4, reuse=10_000)
    for batch_id in range(4):
        table.put(batch_id, None, None, t=0)
    sampler = UniformSampler(table, seed, window=0)
    out = []
    for t in range(1, draws + 1):
        entry = sampler.sample(t)
        assert entry is not None
        out.append(entry.batch_id)
    return out


def test_same_seed_same_sequence() -> None:
    assert draw_sequence(5) == draw_sequence(5)
    assert draw_sequence(5) != draw_sequence(6)


def test_empty_table_gives_none() -> None:
    sampler = UniformSampler(WorksetTable(workset=3, reuse=3), seed=0)
    assert sampler.sample(0) is None


def test_recent_window_rejects_last_w_minus_1() -> None:
    table = WorksetTable(workset=3, reuse=100)
    for batch_id in (10, 11, 12):
        table.put(batch_id, None, None, t=0)
    sampler = UniformSampler(table, seed=1)
    assert sampler.window == 2
    ids = [sampler.sample(t).batch_id for t in range(1, 10)]  # type: ignore[union-attr]
    # With three entries and a window of two, sampling is a forced rotation.
    assert ids[3:] == ids[:3] * 2
    assert sorted(ids[:3]) == [10, 11, 12]


def test_none_when_everything_is_recent() -> None:
    table = WorksetTable(workset=3, reuse=100)
    table.put(1, None, None, t=0)
    sampler = UniformSampler(table, seed=0)
    assert sampler.sample(1) is not None
    assert sampler.sample(2) is None  # the only entry was just sampled
    assert 1 in table


def test_window_of_one_batch_allows_immediate_repeat() -> None:
    table = WorksetTable(workset=1, reuse=4)
    table.put(3, None, None, t=0)
    sampler = UniformSampler(table, seed=0)
    assert [sampler.sample(t).batch_id for t in (1, 2, 3)] == [3, 3, 3]  # type: ignore[union-attr]
    assert sampler.sample(4) is None  # used up: 1 round + 3 local


def test_stale_entries_are_evicted_while_sampling() -> None:
    table = WorksetTable(workset=2, reuse=2)  # W*R = 4
    table.put(0, None, None, t=0)
    table.put(1, None, None, t=3)
    sampler = UniformSampler(table, seed=0)
    entry = sampler.sample(4)
    assert entry is not None and entry.batch_id == 1
    assert 0 not in table


def test_roughly_uniform() -> None:
    counts = Counter(draw_sequence(seed=123, draws=4000))
    assert set(counts) == {0, 1, 2, 3}
    assert all(850 < c < 1150 for c in counts.values()), counts


@pytest.mark.parametrize("window", [-1, 1.5, True])
def test_bad_window_raises(window: object) -> None:
    with pytest.raises(WorksetError, match="window"):
        UniformSampler(WorksetTable(2, 2), seed=0, window=window)  # type: ignore[arg-type]


def test_bad_seed_raises() -> None:
    with pytest.raises(WorksetError, match="seed"):
        UniformSampler(WorksetTable(2, 2), seed="x")  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(workset=st.integers(2, 6), reuse=st.integers(2, 6), seed=st.integers(0, 10_000))
def test_steady_rounds_never_repeat_within_window(workset: int, reuse: int, seed: int) -> None:
    table = WorksetTable(workset, reuse)
    sampler = UniformSampler(table, seed)
    t, history = 0, []
    for batch_id in range(30):
        table.put(batch_id, None, None, t)
        t += 1
        while (entry := sampler.sample(t)) is not None:
            history.append(entry.batch_id)
            t += 1
    for i, batch_id in enumerate(history):
        assert batch_id not in history[max(0, i - (workset - 1)) : i]
