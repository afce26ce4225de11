"""WOE and IV from counts (the smoothing, bins without rows, no events), monotone
merging, selection by IV."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from vfl.party.analysis.woe import WoeError, merged, monotone_starts, select, woe_iv


def test_woe_and_iv_by_hand_with_the_smoothing() -> None:
    # Prepare: E = 10, N = 30; the third bin has no non-event: 4.5 / 0.5
    events, non_events = [2, 4, 4, 0], [20, 10, 0, 0]
    # Execute
    woe, iv = woe_iv(events, non_events)
    # Assert
    w1 = math.log((2 / 10) / (20 / 30))
    w2 = math.log((4 / 10) / (10 / 30))
    w3 = math.log((4.5 / 10) / (0.5 / 30))
    assert woe == pytest.approx([w1, w2, w3, 0.0], abs=1e-12)
    expected = (0.2 - 20 / 30) * w1 + (0.4 - 10 / 30) * w2 + (0.45 - 0.5 / 30) * w3
    assert iv == pytest.approx(expected, abs=1e-12)


def test_one_bin_is_worth_nothing_and_no_event_is_an_error() -> None:
    assert woe_iv([5], [7]) == ([0.0], 0.0)
    with pytest.raises(WoeError, match="no event"):
        woe_iv([0, 0], [3, 4])
    with pytest.raises(ValueError, match="one count per bin"):
        woe_iv([1, 2], [3])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 50)), min_size=1, max_size=12))
def test_merged_bins_have_a_monotone_event_rate(bins) -> None:
    events, non_events = [b[0] for b in bins], [b[1] for b in bins]
    starts = monotone_starts(events, non_events)
    assert starts[0] == 0 and starts == sorted(set(starts))
    e, n = merged(events, starts), merged(non_events, starts)
    assert sum(e) == sum(events) and sum(n) == sum(non_events)
    rates = [a / (a + b) for a, b in zip(e, n, strict=True) if a + b]
    assert rates == sorted(rates) or rates == sorted(rates, reverse=True)
    assert len(rates) == len(starts) or sum(e) + sum(n) == 0  # no group without rows


def test_select_keeps_the_bar_the_top_and_at_least_one() -> None:
    ivs = {"a": 0.5, "b": 0.01, "c": 0.2, "d": None}
    assert select(ivs, 0.02, None) == {"a", "c"}
    assert select(ivs, None, 1) == {"a"}
    assert select(ivs, 0.02, 5) == {"a", "c"}
    assert select(ivs, 0.9, None) == {"a"}  # nothing passes: the best one stays


def test_counts_are_exact_integers_of_the_bucket_sums_kernel() -> None:
    """The encrypted (event, 1) sums per bin decrypt to the plaintext counts exactly."""
    from vfl.secure.histograms import Bins, Layout, bucket_sums, decrypt, encrypt_rows, pack
    from vfl.secure.ou.keys import generate_ou_keypair

    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 500).astype(np.float64)
    codes = rng.integers(0, 7, (500, 2))
    keys = generate_ou_keypair("bank", 1024, allow_insecure_test_keys=True)
    layout = Layout.create(2, 500, 1.0, 0, keys.public.plaintext_bits)
    rows = encrypt_rows(np.column_stack([y, np.ones(500)]), keys.private, layout)
    sums = decrypt(pack(bucket_sums(rows, Bins(codes, (7, 7)))), keys.private, scaled=False)
    for j in range(2):
        want_e = np.bincount(codes[:, j], weights=y, minlength=7)
        want_n = np.bincount(codes[:, j], minlength=7)
        assert (sums[7 * j : 7 * j + 7, 0] == want_e).all()
        assert (sums[7 * j : 7 * j + 7, 1] == want_n).all()
