"""`protocol: secureboost` over the in-process channel (parties as threads), with small
Okamoto-Uchiyama test keys: the same trees as `split` grows from the same fixed-point
(g, h), for every task (multiclass: every class in one ciphertext; regression: three
parties, subsample, empty cells), only ciphertexts where split sends (g, h) and sums, a
resume from the keys of the checkpoints, and forged sums named by their sender."""

from __future__ import annotations

import numpy as np
import pytest
from gmpy2 import mpz
from vfl.contract.spec import TableSource
from vfl.party.state import StateDir
from vfl.party.state.model_store import ModelStore
from vfl.party.training.trees import encrypted
from vfl.party.training.trees.encrypted import EncryptedHistograms
from vfl.party.training.trees.histograms import PlainGradients
from vfl.secure.channel import InProcessHub, decode_payload
from vfl.secure.errors import ChannelClosed, PayloadError
from vfl.secure.histograms import packed_to_payload
from vfl.secure.histograms.packing import PackedBuckets

from tests.party.test_trees_training import _assert_same, trees_spec
from tests.support.data import breast, motor, shared_data
from tests.support.harness import run_inprocess

TEST_KEYS = {"key_bits": 768, "allow_insecure_test_keys": True}  # small test keys


def secure_spec(trees: dict, parties=None, **sections):
    extra = {"protocol": "secureboost", "crypto": TEST_KEYS, **sections}
    return trees_spec(trees, parties, **extra) if parties else trees_spec(trees, **extra)


def fixed_point(monkeypatch, scale_bits: int) -> None:
    """`split`'s (g, h) rounded to the fixed point secureboost encrypts them at."""
    plain = PlainGradients.payload

    def rounded(self, gh):
        return plain(self, np.rint(gh * 2.0**scale_bits) / 2.0**scale_bits)

    monkeypatch.setattr(PlainGradients, "payload", rounded)


def vehicle() -> dict:
    return {
        "a": {
            "d": TableSource(
                path=str(shared_data("fate", "vehicle_scale_hetero_guest.csv")), label="y"
            )
        },
        "b": {"d": TableSource(path=str(shared_data("fate", "vehicle_scale_hetero_host.csv")))},
    }


@pytest.mark.parametrize(
    ("task", "trees", "parties", "data"),
    [
        ("binary", {"count": 6, "depth": 3}, None, breast),
        ("multiclass", {"count": 3, "depth": 3}, (("a", "active"), ("b", "passive")), vehicle),
        (
            "regression",
            {"count": 4, "depth": 3, "subsample": 0.7},
            (("plant", "active"), ("s1", "passive"), ("s2", "passive")),
            motor,
        ),
    ],
)
def test_secureboost_grows_the_trees_split_grows_from_the_same_fixed_point(
    monkeypatch, task, trees, parties, data
) -> None:
    # Prepare
    spec = {**trees, "task": task}
    scale = encrypted.REGRESSION_SCALE_BITS if task == "regression" else encrypted.SCALE_BITS
    active = "bank" if parties is None else parties[0][0]
    # Execute
    secure = run_inprocess(secure_spec(spec, parties), data())
    fixed_point(monkeypatch, scale)
    split = run_inprocess(trees_spec(spec, parties) if parties else trees_spec(spec), data())
    # Assert: the same validation margins and the same splits at every party
    ours, theirs = secure[active], split[active]
    assert np.array_equal(ours["validation_outputs"], theirs["validation_outputs"])
    assert ours["metrics"] == theirs["metrics"]
    for party, result in secure.items():
        assert result["importance"] == split[party]["importance"]


def test_a_resumed_secureboost_job_ends_with_the_uninterrupted_model(tmp_path) -> None:
    # Prepare: checkpoints after every round, the keys in them
    spec = secure_spec({"count": 5, "depth": 3})
    whole = {p: StateDir(tmp_path / "whole" / p) for p in ("bank", "shop")}
    broken = {p: StateDir(tmp_path / "broken" / p) for p in ("bank", "shop")}
    uninterrupted = run_inprocess(spec, breast(), states=whole)
    hub = InProcessHub()

    def die(direction, sender, receiver, tag, data) -> None:
        if tag == "tree/r4/d1/hist":
            hub.close("killed")

    # Execute: dies within round 4, resumes after round 3 with nothing exchanged
    with pytest.raises(ChannelClosed):
        run_inprocess(spec, breast(), hook=die, states=broken, hub=hub)
    assert broken["bank"].rounds("job")[-1] == 3 == broken["shop"].rounds("job")[-1]
    sent: list[str] = []
    resumed = run_inprocess(
        spec,
        breast(),
        states=broken,
        resume_round=3,
        hook=lambda d, s, r, tag, data: sent.append(tag),
    )
    # Assert: no key crossed again; the same model and validations
    assert "tree/key" not in sent and "tree/r4/gh" in sent
    for party in ("bank", "shop"):
        a = ModelStore(whole[party]).load("job", party)[1]
        b = ModelStore(broken[party]).load("job", party)[1]
        _assert_same(a, b)
    assert resumed["bank"]["metrics"] == uninterrupted["bank"]["metrics"]


def test_only_ciphertexts_carry_gradients_and_sums() -> None:
    # Prepare
    payloads: dict[str, set[str]] = {}

    def kind(direction, sender, receiver, tag, data) -> None:
        if direction == "sent" and tag.startswith("tree/"):
            step = tag.split("/")[-1]
            payloads.setdefault(step, set()).add(decode_payload(data).WhichOneof("kind"))

    # Execute
    run_inprocess(secure_spec({"count": 2, "depth": 2}), breast(), hook=kind)
    # Assert
    assert payloads["key"] == {"public_key"} and payloads["layout"] == {"layer_setup"}
    assert payloads["gh"] == {"ciphertexts"} and payloads["hist"] == {"ciphertexts"}


def test_forged_sums_fail_the_job_naming_their_sender(monkeypatch) -> None:
    # Prepare: the shop's sums replaced by ciphertexts of a value no sum can be
    def forged(self, sums):
        key, count = self.key, sum(s.total for s in sums)
        big = pow(int(key.g), 1 << (key.plaintext_bits - 2), int(key.n))
        packed = [mpz(big)] * self.buckets.packed_count(count)
        return packed_to_payload(PackedBuckets(key, self.buckets, count, packed))

    monkeypatch.setattr(EncryptedHistograms, "payload", forged)
    # Execute, Assert
    with pytest.raises(PayloadError, match=r"party 'shop' sent a malformed tree/r1/d0/hist"):
        run_inprocess(secure_spec({"count": 2, "depth": 2}), breast())
