"""Reading a wire audit: per-direction summaries, and the plaintext scan at every byte
alignment (`party.transport.audit_check`)."""

from __future__ import annotations

import hashlib

import numpy as np
from vfl.party.transport.audit_check import find_plaintext, leaks, plaintext_patterns, summarize


def record(sender: str, receiver: str, direction: str, kind: str, data: bytes) -> dict:
    sha = hashlib.sha256(data).hexdigest()
    return {
        "sender": sender,
        "receiver": receiver,
        "direction": direction,
        "kind": kind,
        "size": len(data),
        "sha256": sha,
        "data": data,
    }


def test_plaintext_is_found_at_every_offset_and_only_when_present() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(20, 5))
    y = rng.integers(0, 2, size=20).astype(float)
    patterns = plaintext_patterns(x, y)
    value, pair, labels = patterns["feature"][7], patterns["feature"][-1], patterns["label"][1]
    for offset in range(9):
        blob = rng.bytes(offset) + value + rng.bytes(13) + labels + rng.bytes(offset)
        found = find_plaintext([blob], patterns["feature"] + patterns["label"])
        assert {value, labels} <= found and pair not in found
    noise = rng.bytes(1 << 16)
    assert find_plaintext([noise], patterns["feature"] + patterns["label"]) == set()


def test_small_values_are_not_patterns() -> None:
    patterns = plaintext_patterns(np.array([[0.0, 0.0, 2.5]]))
    assert np.float64(0.0).tobytes() not in patterns["feature"]
    assert np.array([0.0, 0.0], "<f4").tobytes() not in patterns["feature"]
    assert np.array([0.0, 2.5], "<f4").tobytes() in patterns["feature"]


def test_summary_counts_each_envelope_once_by_its_sender() -> None:
    records = [
        record("bank", "shop", "sent", "ciphertexts", b"a" * 10),
        record("bank", "shop", "received", "ciphertexts", b"a" * 10),  # the shop's copy
        record("bank", "shop", "sent", "public_key", b"b" * 3),
        record("shop", "bank", "sent", "ciphertexts", b"c" * 5),
    ]
    summary = summarize(records)
    assert summary[("bank", "shop")].envelopes == 2 and summary[("bank", "shop")].bytes == 13
    assert dict(summary[("bank", "shop")].kinds) == {"ciphertexts": 1, "public_key": 1}
    assert summary[("shop", "bank")].bytes == 5
    leaked = record("bank", "shop", "sent", "tensor", b"xx" + np.float64(3.25).tobytes())
    assert leaks([*records, leaked], plaintext_patterns(np.array([[3.25, 1.0]]))) == {
        "feature": 1,
        "label": 0,
    }


def sent(sender: str, tag: str, kind: str) -> dict:
    """An envelope's audit record, sent by `sender` to the other of bank and shop."""
    receiver = "shop" if sender == "bank" else "bank"
    return {"direction": "sent", "sender": sender, "receiver": receiver, "tag": tag, "kind": kind}


def test_a_tree_jobs_envelopes_are_checked_by_tag_sender_and_kind() -> None:
    from vfl.party.transport.audit_check import tree_problems

    good = [
        sent("bank", "tree/r1/go", "control"),
        sent("bank", "tree/r1/gh", "tensor"),
        sent("shop", "tree/r1/d0/hist", "tensor"),
        sent("shop", "tree/r1/d0/ids", "indices"),
        sent("bank", "tree/r1/d2/grow", "tensor"),
        sent("shop", "predict/b3/bits", "tensor"),
        sent("shop", "psi/own/shop/0", "ec_points"),
    ]
    assert tree_problems(good, active="bank") == []
    bad = [
        sent("shop", "tree/r1/gh", "tensor"),  # (g, h) only from the active party
        sent("bank", "tree/r1/d0/pick", "ciphertexts"),
        sent("bank", "train/r1/grad", "tensor"),
    ]
    assert tree_problems(bad, active="bank") == [
        "shop -> bank tree/r1/gh: sent by the wrong party",
        "bank -> shop tree/r1/d0/pick: payload kind ciphertexts",
        "bank -> shop train/r1/grad: not a tree message",
    ]


def test_under_secureboost_gradients_and_sums_cross_as_ciphertexts_only() -> None:
    from vfl.party.transport.audit_check import tree_problems

    good = [
        sent("bank", "tree/key", "public_key"),
        sent("bank", "tree/layout", "layer_setup"),
        sent("bank", "tree/r1/gh", "ciphertexts"),
        sent("shop", "tree/r1/d0/hist", "ciphertexts"),
        sent("shop", "tree/r1/d0/part", "tensor"),
    ]
    assert tree_problems(good, active="bank", protocol="secureboost") == []
    bad = [sent("bank", "tree/r1/gh", "tensor"), sent("shop", "tree/r1/d1/hist", "tensor")]
    assert tree_problems(bad, active="bank", protocol="secureboost") == [
        "bank -> shop tree/r1/gh: payload kind tensor",
        "shop -> bank tree/r1/d1/hist: payload kind tensor",
    ]
    assert tree_problems(good[:1], active="bank") == [
        "bank -> shop tree/key: payload kind public_key"
    ]
