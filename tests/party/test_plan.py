"""The training schedule's defaults at scale: how often to validate, and validation in
chunks that every party derives alike."""

from __future__ import annotations

import numpy as np
from vfl.party.training.plan import CHUNK_BYTES, in_chunks, make_plan, validation_every


def test_small_tables_validate_every_20_rounds_and_a_set_cadence_wins() -> None:
    assert validation_every(None, 114, 256, "blindfl") == 20  # breast
    assert validation_every(None, 6_000, 256, "split") == 20  # 30k credit rows
    assert validation_every(7, 2_000_000, 256, "split") == 7


def test_large_tables_validate_less_often_by_protocol() -> None:
    # 1e6 rows, 20% held out: split about 16 times an epoch, blindfl about once
    rounds_per_epoch = 800_000 // 256
    split = validation_every(None, 200_000, 256, "split")
    blindfl = validation_every(None, 200_000, 256, "blindfl")
    assert split == 196 and 14 <= rounds_per_epoch / split <= 17
    assert blindfl == 2344 and rounds_per_epoch / blindfl < 1.5
    assert make_plan(1_000_000, 0.2, 256, 1, 0, None).every == split


def test_validation_chunks_cover_the_rows_in_order_within_the_message_limit() -> None:
    rows = np.arange(100_000)[::-1]
    chunks = in_chunks("val/r7", rows, 16)
    assert [tag for tag, _ in chunks[:2]] == ["val/r7/c0", "val/r7/c1"]
    assert np.array_equal(np.concatenate([part for _, part in chunks]), rows)
    assert all(len(part) * 16 * 4 <= CHUNK_BYTES for _, part in chunks)
    assert len(in_chunks("v", rows, 1 << 20)[0][1]) == 256  # wide outputs: 256 rows at least


def test_the_rows_of_a_round_are_the_batches_rows() -> None:
    from vfl.party.training.plan import Plan

    plan = Plan(1000, np.arange(0, 1000, 3), np.arange(5), 64, 3, 7, 20)
    for rnd, _, rows in plan.batches():
        assert np.array_equal(plan.round_rows(rnd), rows), rnd
