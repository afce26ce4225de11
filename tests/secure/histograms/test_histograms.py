"""Encrypted bucket sums equal numpy's sums of the same rows, exactly: negatives, k > 2
values per row (several ciphertexts per row), empty buckets, subtraction, cumulative sums,
shuffles, the boundaries of packing, and the checks that keep any sum from wrapping."""

from __future__ import annotations

import numpy as np
import pytest
from vfl.secure.errors import EncodingError, InputError, OuKeyError, PayloadError
from vfl.secure.histograms import (
    Bins,
    BucketSummer,
    EncryptedBuckets,
    Layout,
    PackedBuckets,
    bucket_sums,
    cumulative,
    decrypt,
    encrypt_rows,
    join,
    pack,
    subtract,
)
from vfl.secure.histograms.plan import column_groups, sum_products
from vfl.secure.ou.cipher import OwnerEncryptor
from vfl.secure.ou.keys import generate_ou_keypair

from tests.secure.histograms.support import grid_values, plain_sums, random_bins

ROWS = 240


def layout_for(key, values=2, rows=ROWS, bound=4.0, scale_bits=12) -> Layout:
    return Layout.create(values, rows, bound, scale_bits, key.public.plaintext_bits)


@pytest.fixture(scope="module")
def gh(ou_test_key):
    """Gradient and hessian-like rows, negatives included, and their encryption."""
    rng = np.random.default_rng(1)
    layout = layout_for(ou_test_key)
    values = grid_values(rng, ROWS, layout)
    return values, encrypt_rows(values, ou_test_key.private, layout)


def test_sums_over_all_rows_and_a_subset_equal_numpys(ou_test_key, gh) -> None:
    # Prepare
    values, rows = gh
    rng = np.random.default_rng(2)
    bins = random_bins(rng, ROWS, (4, 7, 1, 5))
    select = rng.choice(ROWS, 97, replace=False)
    summer = BucketSummer(rows, bins)
    # Execute
    root, node = summer.sums(), summer.sums(select)
    # Assert
    assert np.array_equal(decrypt(pack(root), ou_test_key.private), plain_sums(values, bins))
    assert np.array_equal(
        decrypt(pack(node), ou_test_key.private), plain_sums(values, bins, select)
    )
    assert (root.rows, node.rows) == (ROWS, 97)


def test_columns_are_summed_in_pairs_where_it_saves_products(ou_test_key, gh) -> None:
    assert column_groups(30_000, (32,) * 5) == [(0, 1), (2, 3), (4,)]
    assert column_groups(2_047, (32, 32)) == [(0,), (1,)]
    assert sum_products(30_000, (32,) * 10) == 5 * (30_000 + 2 * 1_024)
    assert sum_products(1_000, (32,) * 10) == 10_000
    # the same sums whichever way: bins of 3 (pairs of 9 joint buckets) and of 60 (alone)
    values, rows = gh
    rng = np.random.default_rng(12)
    for counts in ((3, 3, 3), (60, 60, 60)):
        bins = random_bins(rng, ROWS, counts)
        got = decrypt(pack(bucket_sums(rows, bins)), ou_test_key.private)
        assert np.array_equal(got, plain_sums(values, bins))
    assert column_groups(ROWS, (3, 3, 3)) == [(0, 1), (2,)]
    assert column_groups(ROWS, (60, 60, 60)) == [(0,), (1,), (2,)]


def test_exact_integer_sums_at_the_layout_scale(ou_test_key, gh) -> None:
    values, rows = gh
    bins = random_bins(np.random.default_rng(3), ROWS, (6,))
    sums = decrypt(pack(bucket_sums(rows, bins)), ou_test_key.private, scaled=False)
    assert sums.dtype == np.int64
    ints = np.rint(values * 2.0**rows.layout.scale_bits)
    assert np.array_equal(sums, plain_sums(ints, bins))


def test_subtraction_gives_the_sibling_and_cumulative_sums_the_left_sides(ou_test_key, gh) -> None:
    values, rows = gh
    rng = np.random.default_rng(4)
    bins = random_bins(rng, ROWS, (5, 3))
    select = rng.choice(ROWS, 60, replace=False)
    rest = np.setdiff1d(np.arange(ROWS), select)
    summer = BucketSummer(rows, bins)
    sibling = subtract(summer.sums(), summer.sums(select))
    assert sibling.rows == ROWS - 60
    assert np.array_equal(
        decrypt(pack(sibling), ou_test_key.private), plain_sums(values, bins, rest)
    )
    left = decrypt(pack(cumulative(sibling)), ou_test_key.private)
    expected = plain_sums(values, bins, rest)
    assert np.array_equal(left[:5], np.cumsum(expected[:5], axis=0))
    assert np.array_equal(left[5:], np.cumsum(expected[5:], axis=0))


def test_empty_buckets_and_an_empty_selection_sum_to_zero(ou_test_key, gh) -> None:
    values, rows = gh
    bins = random_bins(np.random.default_rng(5), ROWS, (8, 8), used=3)
    summer = BucketSummer(rows, bins)
    got = decrypt(pack(summer.sums()), ou_test_key.private)
    assert np.array_equal(got, plain_sums(values, bins))
    assert not got[3:8].any() and not got[11:].any()
    assert not decrypt(pack(summer.sums([])), ou_test_key.private).any()


def test_a_shuffled_pack_returns_the_sums_in_that_order(ou_test_key, gh) -> None:
    values, rows = gh
    bins = random_bins(np.random.default_rng(6), ROWS, (9, 4))
    order = np.random.default_rng(7).permutation(13)
    got = decrypt(pack(bucket_sums(rows, bins), order), ou_test_key.private)
    assert np.array_equal(got, plain_sums(values, bins)[order])
    with pytest.raises(InputError, match="outside"):
        pack(bucket_sums(rows, bins), [0, 13])
    with pytest.raises(InputError, match="1-D"):
        pack(bucket_sums(rows, bins), np.zeros((2, 2), dtype=int))


def test_a_level_of_nodes_packs_its_candidates_into_one_message(ou_test_key, gh) -> None:
    """What a trees job sends per level: every node's left-side sums of its candidates
    (cumulative sums, a subset of the buckets: not each column's last), node after node,
    in one packed message."""
    # Prepare
    values, rows = gh
    rng = np.random.default_rng(13)
    bins = random_bins(rng, ROWS, (5, 4))
    nodes = np.array_split(rng.permutation(ROWS), 3)
    summer = BucketSummer(rows, bins)
    candidates = [0, 1, 2, 3, 5, 6, 7]  # thresholds: every bin of a column but its last
    positions = [node * 9 + c for node in range(3) for c in candidates]
    # Execute
    level = join([cumulative(sums) for sums in summer.sums_each(nodes)])
    got = decrypt(pack(level, positions), ou_test_key.private)
    # Assert
    expected = []
    for node in nodes:
        plain = plain_sums(values, bins, node)
        left = np.concatenate([np.cumsum(plain[:5], axis=0), np.cumsum(plain[5:], axis=0)])
        expected.append(left[candidates])
    assert np.array_equal(got, np.concatenate(expected))
    assert level.counts == (5, 4) * 3 and level.rows == max(map(len, nodes))
    with pytest.raises(InputError, match="at least one"):
        join([])


def test_many_values_per_row_take_several_ciphertexts(ou_test_key) -> None:
    # Prepare: 12 values (six classes' g and h) at a scale that leaves 6 slots a ciphertext
    layout = layout_for(ou_test_key, values=12, bound=1.0, scale_bits=40)
    assert (layout.slots, layout.parts) == (6, 2)
    rng = np.random.default_rng(8)
    values = grid_values(rng, ROWS, layout)
    bins = random_bins(rng, ROWS, (3, 6))
    select = rng.choice(ROWS, 150, replace=False)
    # Execute
    rows = encrypt_rows(values, ou_test_key.private, layout)
    node = BucketSummer(rows, bins).sums(select)
    # Assert
    assert rows.data.shape == (ROWS, 2, ou_test_key.public.width)
    assert len(node.ciphertexts) == 9 * 2
    got = decrypt(pack(node), ou_test_key.private)
    assert np.array_equal(got, plain_sums(values, bins, select))


@pytest.mark.parametrize("extra", [-1, 0, 1])
def test_packing_boundaries(ou_test_key, gh, extra) -> None:
    values, rows = gh
    per = rows.layout.per_cipher
    total = 2 * per + extra
    bins = random_bins(np.random.default_rng(9), ROWS, (total,))
    packed = pack(bucket_sums(rows, bins))
    assert len(packed.ciphertexts) == 2 + (extra > 0)
    assert np.array_equal(decrypt(packed, ou_test_key.private), plain_sums(values, bins))


def test_the_largest_sums_and_their_differences_do_not_wrap(ou_test_key) -> None:
    # Prepare: every row at the bound, half positive and half negative, in one bucket
    layout = layout_for(ou_test_key, rows=64, bound=1.0, scale_bits=30)
    top = layout.largest * 2.0**-layout.scale_bits
    values = np.repeat([[top, -top], [-top, top]], 32, axis=0)
    rows = encrypt_rows(values, ou_test_key.private, layout)
    summer = BucketSummer(rows, Bins(np.zeros((64, 1), dtype=int), (1,)))
    positive, negative = summer.sums(np.arange(32)), summer.sums(np.arange(32, 64))
    # Execute
    difference = subtract(positive, negative)
    # Assert
    got = decrypt(pack(difference), ou_test_key.private, scaled=False)
    assert got.tolist() == [[64 * layout.largest, -64 * layout.largest]]
    assert 64 * layout.largest < 2 ** (layout.slot_bits - 1)


def test_layouts_that_could_wrap_are_refused(ou_test_key) -> None:
    capacity = ou_test_key.public.plaintext_bits
    with pytest.raises(EncodingError, match="needs 67-bit slots"):
        Layout.create(2, 2**20, 1.0, 43, capacity)
    with pytest.raises(EncodingError, match="more than 50"):
        Layout.create(2, 2**20, 1.0, 30, 50)
    layout = Layout.create(2, 10, 1.0, 8, capacity)
    with pytest.raises(EncodingError, match="exceeds the layout's bound"):
        encrypt_rows(np.array([[2.0, 0.0]]), ou_test_key.private, layout)
    with pytest.raises(EncodingError, match="NaN"):
        encrypt_rows(np.array([[np.nan, 0.0]]), ou_test_key.private, layout)
    with pytest.raises(InputError, match="more than the layout's 10"):
        encrypt_rows(np.zeros((11, 2)), ou_test_key.private, layout)
    with pytest.raises(InputError, match=r"\(rows, 2\)"):
        encrypt_rows(np.zeros((3, 3)), ou_test_key.private, layout)
    with pytest.raises(InputError, match="bound"):
        Layout.create(2, 10, float("inf"), 8, capacity)


def test_sums_that_could_wrap_are_refused(ou_test_key, gh) -> None:
    _, rows = gh
    bins = random_bins(np.random.default_rng(10), ROWS, (3,))
    summer = BucketSummer(rows, bins)
    with pytest.raises(InputError, match="repeats a row"):
        summer.sums([1, 2, 1])
    with pytest.raises(InputError, match="outside"):
        summer.sums([ROWS])
    small, large = summer.sums([1]), summer.sums([1, 2])
    with pytest.raises(InputError, match="more than its parent"):
        subtract(small, large)
    other = EncryptedBuckets(small.key, small.layout, (2, 1), small.ciphertexts, 1)
    with pytest.raises(InputError, match="other keys, layouts or bins"):
        subtract(large, other)
    corrupt = [ou_test_key.private.p, *small.ciphertexts[1:]]
    with pytest.raises(InputError, match="not a unit"):
        subtract(large, EncryptedBuckets(small.key, small.layout, small.counts, corrupt, 1))


def test_bins_are_checked(gh) -> None:
    _, rows = gh
    with pytest.raises(InputError, match="outside its column"):
        Bins(np.array([[0, 3]]), (2, 3))
    with pytest.raises(InputError, match="one count"):
        Bins(np.zeros((2, 2), dtype=int), (2,))
    with pytest.raises(InputError, match="integer"):
        Bins(np.zeros((2, 2)), (2, 2))
    with pytest.raises(InputError, match="rows of bins"):
        BucketSummer(rows, Bins(np.zeros((3, 1), dtype=int), (1,)))
    assert Bins(np.zeros((2, 1), dtype=int), (300,)).codes.dtype == np.uint16


def test_a_forged_packed_plaintext_is_refused_at_decryption(ou_test_key, gh) -> None:
    _, rows = gh
    layout = rows.layout
    too_big = 2 ** (layout.per_cipher * layout.unit_bits - 1)
    forged = OwnerEncryptor(ou_test_key.private, layout.capacity).encrypt([too_big])
    packed = PackedBuckets(ou_test_key.public, layout, layout.per_cipher, forged)
    with pytest.raises(PayloadError, match="malformed"):
        decrypt(packed, ou_test_key.private)
    other = generate_ou_keypair("B", 768, allow_insecure_test_keys=True)
    with pytest.raises(OuKeyError, match="not the given one"):
        decrypt(packed, other.private)


@pytest.mark.slow
def test_sums_at_2048_bits_equal_numpys() -> None:
    keys = generate_ou_keypair("B", 2048)
    layout = Layout.create(2, 400, 1.0, 24, keys.public.plaintext_bits)
    assert (keys.public.plaintext_bits, layout.slot_bits, layout.per_cipher) == (682, 36, 9)
    rng = np.random.default_rng(11)
    values = grid_values(rng, 400, layout)
    bins = random_bins(rng, 400, (32, 32, 16))
    select = rng.choice(400, 150, replace=False)
    summer = BucketSummer(encrypt_rows(values, keys.private, layout), bins)
    node = summer.sums(select)
    sibling = subtract(summer.sums(), node)
    rest = np.setdiff1d(np.arange(400), select)
    assert np.array_equal(decrypt(pack(node), keys.private), plain_sums(values, bins, select))
    assert np.array_equal(decrypt(pack(sibling), keys.private), plain_sums(values, bins, rest))
