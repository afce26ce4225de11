"""Bucket sums on the wire: round trips, a whole exchange between two parties over the
in-process channel, and malformed input from a peer as a named `PayloadError`."""

from __future__ import annotations

import numpy as np
import pytest
from vfl.proto import common_pb2
from vfl.secure.channel import InProcessHub
from vfl.secure.errors import PayloadError
from vfl.secure.histograms import (
    BucketSummer,
    Layout,
    decrypt,
    encrypt_rows,
    layout_from_payload,
    layout_to_payload,
    pack,
    packed_from_payload,
    packed_to_payload,
    rows_from_payload,
    rows_to_payload,
    subtract,
)
from vfl.secure.wire import ou_public_key_from_payload, ou_public_key_to_payload

from tests.secure.histograms.support import grid_values, plain_sums, random_bins
from tests.support.secure import run_parties

ROWS = 120


@pytest.fixture(scope="module")
def encrypted(ou_test_key):
    layout = Layout.create(2, ROWS, 2.0, 16, ou_test_key.public.plaintext_bits)
    values = grid_values(np.random.default_rng(20), ROWS, layout)
    return values, encrypt_rows(values, ou_test_key.private, layout)


@pytest.fixture(scope="module")
def packed(encrypted):
    _, rows = encrypted
    bins = random_bins(np.random.default_rng(21), ROWS, (10, 4))
    return pack(BucketSummer(rows, bins).sums()), bins


def test_layout_rows_and_packed_buckets_round_trip(ou_test_key, encrypted, packed) -> None:
    values, rows = encrypted
    buckets, bins = packed
    key = ou_test_key.public
    layout = layout_from_payload(layout_to_payload(rows.layout), key)
    assert layout == rows.layout
    again = rows_from_payload(rows_to_payload(rows), key, layout)
    assert np.array_equal(again.data, rows.data) and again.key == key
    back = packed_from_payload(packed_to_payload(buckets), key, layout, 14)
    assert back == buckets
    assert np.array_equal(decrypt(back, ou_test_key.private), plain_sums(values, bins))


def test_the_exchange_between_two_parties_over_a_channel(ou_test_key) -> None:
    """B encrypts and sends its key, layout and rows; A sums a node and its sibling and
    returns them packed; B decrypts: what the trees and WOE/IV jobs do, payloads
    serialised as on the wire."""
    # Prepare
    rng = np.random.default_rng(22)
    layout = Layout.create(2, ROWS, 1.0, 20, ou_test_key.public.plaintext_bits)
    values = grid_values(rng, ROWS, layout)
    bins = random_bins(rng, ROWS, (6, 6, 6))
    select = rng.choice(ROWS, 50, replace=False)
    hub = InProcessHub()
    active, passive = hub.channel("B"), hub.channel("A1")

    def bank() -> np.ndarray:
        active.send("A1", "hist/pk", ou_public_key_to_payload(ou_test_key.public))
        active.send("A1", "hist/layout", layout_to_payload(layout))
        active.send(
            "A1", "t1/rows", rows_to_payload(encrypt_rows(values, ou_test_key.private, layout))
        )
        parts = [
            packed_from_payload(active.recv("A1", f"t1/n{i}"), ou_test_key.public, layout, 18)
            for i in (1, 2)
        ]
        return np.stack([decrypt(p, ou_test_key.private) for p in parts])

    def shop() -> None:
        key = ou_public_key_from_payload(
            passive.recv("B", "hist/pk"), "B", allow_insecure_test_keys=True
        )
        agreed = layout_from_payload(passive.recv("B", "hist/layout"), key)
        summer = BucketSummer(rows_from_payload(passive.recv("B", "t1/rows"), key, agreed), bins)
        node = summer.sums(select)
        passive.send("B", "t1/n1", packed_to_payload(pack(node)))
        passive.send("B", "t1/n2", packed_to_payload(pack(subtract(summer.sums(), node))))

    # Execute
    got, _ = run_parties(bank, shop)
    # Assert
    rest = np.setdiff1d(np.arange(ROWS), select)
    assert np.array_equal(got[0], plain_sums(values, bins, select))
    assert np.array_equal(got[1], plain_sums(values, bins, rest))
    width = ou_test_key.public.width
    assert active.stats.bytes_sent > ROWS * width  # the rows, one ciphertext each
    assert passive.stats.bytes_sent < 2 * layout.packed_count(18) * width + 200


def corrupt(payload: common_pb2.Payload, **fields) -> common_pb2.Payload:
    copy = common_pb2.Payload()
    copy.CopyFrom(payload)
    for name, value in fields.items():
        if name == "shape":
            del copy.ciphertexts.shape[:]
            copy.ciphertexts.shape.extend(value)
        else:
            setattr(copy.ciphertexts, name, value)
    return copy


def test_malformed_row_ciphertexts_are_named_payload_errors(ou_test_key, encrypted) -> None:
    _, rows = encrypted
    key, layout = ou_test_key.public, rows.layout
    good = rows_to_payload(rows)
    blob = good.ciphertexts.blob
    width = key.width
    cases = {
        "expected a ciphertexts payload": layout_to_payload(layout),
        "under the key of 'A1'": corrupt(good, key_owner="A1"),
        "expected 128 bytes": corrupt(good, width=64),
        "the layout has": corrupt(good, scale_bits=3),
        "takes at most": corrupt(good, shape=[ROWS, 2]),
        "not a \\(rows, columns\\) pair": corrupt(good, shape=[ROWS]),
        "truncated": corrupt(good, blob=blob[:-1]),
        "outside \\[1, n\\)": corrupt(good, blob=bytes(width) + blob[width:]),
        "outside \\[1, n\\) ": corrupt(good, blob=b"\xff" * width + blob[width:]),
    }
    for message, payload in cases.items():
        with pytest.raises(PayloadError, match=message):
            rows_from_payload(payload, key, layout)
    small = Layout.create(2, ROWS - 1, 2.0, 16, key.plaintext_bits)
    with pytest.raises(PayloadError, match="takes at most 119 rows"):
        rows_from_payload(good, key, small)


def test_malformed_packed_buckets_are_named_payload_errors(ou_test_key, packed) -> None:
    buckets, _ = packed
    key, layout = ou_test_key.public, buckets.layout
    good = packed_to_payload(buckets)
    with pytest.raises(PayloadError, match=f"{14 + layout.per_cipher} buckets take"):
        packed_from_payload(good, key, layout, 14 + layout.per_cipher)
    with pytest.raises(PayloadError, match="the layout has"):
        packed_from_payload(corrupt(good, slots=layout.slots), key, layout, 14)
    with pytest.raises(PayloadError, match="truncated"):
        packed_from_payload(corrupt(good, blob=good.ciphertexts.blob[1:]), key, layout, 14)
    forged = corrupt(
        good, blob=int(key.n - 1).to_bytes(key.width, "big") * len(buckets.ciphertexts)
    )
    with pytest.raises(PayloadError, match="not a ciphertext under the key of 'B'"):
        decrypt(packed_from_payload(forged, key, layout, 14), ou_test_key.private)


def test_a_malformed_layout_is_a_named_payload_error(ou_test_key) -> None:
    key = ou_test_key.public
    bad = [
        common_pb2.BucketLayout(values=2, scale_bits=60, value_bits=61, rows=10),
        common_pb2.BucketLayout(values=0, scale_bits=8, value_bits=9, rows=10),
        common_pb2.BucketLayout(values=10**6, scale_bits=8, value_bits=9, rows=10),
        common_pb2.BucketLayout(values=2, scale_bits=8, value_bits=9, rows=-1),
    ]
    for message in bad:
        payload = common_pb2.Payload(layer_setup=common_pb2.LayerSetup(buckets=message))
        with pytest.raises(PayloadError, match="unusable"):
            layout_from_payload(payload, key)
    other = common_pb2.Payload(layer_setup=common_pb2.LayerSetup(layout=common_pb2.InputLayout()))
    with pytest.raises(PayloadError, match="'buckets'"):
        layout_from_payload(other, key)
