"""Checkpoints of blindfl jobs: a job interrupted after a checkpoint and resumed restores
its keys, shares and the peers' keys (no key exchange, no layer setup, no key generation)
and ends with the validation metric of an uninterrupted run with the same key pairs.

Same key pairs, because a party's initial shares come from the job seed and its private
key (see `tests.support.blindfl_keys`): two runs with fresh keys differ by up to a few
hundredths of AUC on breast, which says nothing about resuming.
"""

from __future__ import annotations

import pytest
from vfl.contract.spec import parse_spec
from vfl.party.state import StateDir
from vfl.secure.channel import InProcessHub
from vfl.secure.errors import ChannelClosed

from tests.party.test_blindfl_training import categorical_job
from tests.support.blindfl_keys import new_keys, pin_keys
from tests.support.data import breast
from tests.support.harness import run_inprocess

CRYPTO = {"key_bits": 512, "allow_insecure_test_keys": True}  # INSECURE test keys
CELU = {"mode": "celu", "workset": 4, "reuse": 3, "schedule": "sync", "steps": 2}
BREAST = {
    "job": "ck",
    "protocol": "blindfl",
    "crypto": CRYPTO,
    "parties": [
        {"id": "bank", "role": "active", "data": {"dataset": "d"}},
        {"id": "shop", "role": "passive", "data": {"dataset": "d"}},
    ],
    "model": {"source": {"out_dim": 4}, "top": {"hidden": [8]}},
    "local_updates": CELU,
    "train": {"epochs": 3, "batch_size": 64, "checkpoint_every": 8},
    "validation": {"every": 8},
}
SETUP_TAGS = ("layout", "src/", "emb/")


def interrupted_and_resumed(spec, datasets, tmp_path, monkeypatch, die_at: str):
    """(uninterrupted result, resumed result, tags sent while resuming) of `spec`, both
    runs with the same pinned key pairs; the second dies at tag `die_at`, after the
    checkpoint of round 8, and resumes without generating a key."""
    parties = [p.id for p in spec.parties]
    pin_keys(monkeypatch, new_keys(parties, spec.crypto.key_bits))
    whole = {p: StateDir(tmp_path / "whole" / p) for p in parties}
    uninterrupted = run_inprocess(spec, datasets, states=whole)
    broken = {p: StateDir(tmp_path / "broken" / p) for p in parties}
    hub = InProcessHub()

    def die(direction, sender, receiver, tag, data) -> None:
        if tag == die_at:
            hub.close("killed")

    with pytest.raises(ChannelClosed):
        run_inprocess(spec, datasets, hook=die, states=broken, hub=hub)
    assert all(broken[p].rounds("job")[-1] == 8 for p in parties)
    pin_keys(monkeypatch, None)
    sent: list[str] = []

    def record(direction, sender, receiver, tag, data) -> None:
        if direction == "sent":
            sent.append(tag)

    resumed = run_inprocess(spec, datasets, hook=record, states=broken, resume_round=8)
    return uninterrupted, resumed, sent


def test_a_resumed_blindfl_job_ends_where_an_uninterrupted_one_ends(tmp_path, monkeypatch):
    # Prepare / Execute: dies in round 13 (m2 of the MatMul layer), resumes after round 8
    spec = parse_spec(BREAST)
    whole, resumed, sent = interrupted_and_resumed(
        spec, breast(), tmp_path, monkeypatch, "train/r13/m2"
    )
    # Assert: no setup message, the rounds after 8 only; the uninterrupted metrics
    assert not [t for t in sent if t.startswith(SETUP_TAGS)], sent[:20]
    train = sorted({int(t.split("/")[1][1:]) for t in sent if t.startswith("train/")})
    assert train == list(range(9, whole["bank"]["rounds"] + 1))
    for metric, value in whole["bank"]["metrics"].items():
        assert abs(resumed["bank"]["metrics"][metric] - value) <= 1e-3, metric
    rounds = [h["round"] for h in resumed["bank"]["history"]]
    assert rounds == [h["round"] for h in whole["bank"]["history"]] == [8, 16, 24]
    assert resumed["shop"]["local_updates"] == whole["shop"]["local_updates"] > 0


def test_a_resumed_blindfl_job_with_categorical_fields(tmp_path, monkeypatch):
    # Prepare: the passive party's fields go through the Embed-MatMul layer only
    spec, datasets = categorical_job(
        tmp_path,
        "blindfl",
        crypto=CRYPTO,
        train={"epochs": 2, "batch_size": 128, "lr": 0.1, "checkpoint_every": 8},
        validation={"every": 8},
    )
    # Execute: dies in round 11 (e of the Embed-MatMul layer)
    whole, resumed, sent = interrupted_and_resumed(
        spec, datasets, tmp_path, monkeypatch, "train/r11/emb/e"
    )
    # Assert: the table step rounds with fresh masks, so not bit for bit: the job's
    # validation metric (AUC) within 2e-2: at AUC 0.69 on these rows, fresh masks alone
    # moved it 1.4e-3 and 5.7e-3 in two fresh-clone runs; what the test guards is that
    # the keys and layers come from the checkpoint (no setup resent) and the rounds follow
    assert not [t for t in sent if t.startswith(SETUP_TAGS)], sent[:20]
    auc = whole["adv"]["metrics"]["auc"]
    assert abs(resumed["adv"]["metrics"]["auc"] - auc) <= 2e-2
    assert [h["round"] for h in resumed["adv"]["history"]] == [8, 16]
