"""Checkpoints at a party: the file format refuses what it must, writes are atomic, and a
split job resumed from a checkpoint ends bit-for-bit where an uninterrupted run ends."""

from __future__ import annotations

import os
import stat

import pytest
import torch
from gmpy2 import mpz
from vfl.contract.spec import parse_spec
from vfl.party.errors import CheckpointError, DataChanged
from vfl.party.state import Checkpoint, StateDir
from vfl.party.state.model_store import ModelStore
from vfl.secure.channel import InProcessHub
from vfl.secure.errors import ChannelClosed
from vfl.secure.paillier.cipher_matrix import CipherMatrix
from vfl.secure.paillier.engine import Paillier
from vfl.secure.paillier.keys import PublicKey

from tests.support.data import breast
from tests.support.disk import scaled
from tests.support.harness import run_inprocess
from tests.support.jobs import checkpointed_breast_job

SPEC = checkpointed_breast_job("ck", "d", epochs=5)


def ck(rnd: int, spec_hash: str = "h", value: float = 1.0) -> Checkpoint:
    return Checkpoint("job", spec_hash, "bank", rnd, {"w": torch.full((2, 2), value)})


def test_only_the_newest_two_stay_and_files_are_private(tmp_path) -> None:
    state = StateDir(tmp_path)
    for rnd in (10, 20, 30):
        path = state.save(ck(rnd))
    assert state.rounds("job") == [20, 30]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert torch.equal(state.load("job", 30, "h", "bank").state["w"], torch.ones(2, 2))


def test_a_crash_while_writing_leaves_the_previous_checkpoint_usable(tmp_path, monkeypatch) -> None:
    # Prepare: one good checkpoint, then a write that dies after some bytes hit the disk
    state = StateDir(tmp_path)
    state.save(ck(10))

    def crash(fd: int) -> None:
        raise OSError("power lost")

    monkeypatch.setattr(os, "fsync", crash)
    # Execute
    with pytest.raises(OSError, match="power lost"):
        state.save(ck(20, value=2.0))
    monkeypatch.undo()
    # Assert: round 10 loads, round 20 never appeared, no temporary file is left
    assert state.rounds("job") == [10]
    assert torch.equal(state.load("job", 10, "h", "bank").state["w"], torch.ones(2, 2))
    assert [p.name for p in state.job_dir("job").iterdir()] == ["round-000000010.ckpt"]


@pytest.mark.parametrize("damage", ["flip", "truncate", "header"])
def test_a_corrupted_checkpoint_is_refused_and_never_loaded(tmp_path, damage) -> None:
    state = StateDir(tmp_path)
    path = state.save(ck(10))
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[-20] ^= 0x01
    elif damage == "truncate":
        data = data[: len(data) // 2]
    else:
        data[:8] = b"NOTACKPT"
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="party 'bank': checkpoint of job job round 10"):
        state.load("job", 10, "h", "bank")
    assert "not loaded" in state.usable_rounds("job", "h", "bank")[10]


def test_a_checkpoint_of_another_spec_or_a_missing_round_is_named(tmp_path) -> None:
    state = StateDir(tmp_path)
    state.save(ck(10, spec_hash="other"))
    with pytest.raises(CheckpointError, match="another job spec"):
        state.load("job", 10, "h", "bank")
    with pytest.raises(
        CheckpointError, match=r"round 20 is missing \(this party holds rounds \[10\]\)"
    ):
        state.load("job", 20, "h", "bank")


def test_ciphertext_matrices_round_trip_as_plain_fields(tmp_path) -> None:
    # Prepare: a cached [[eta G]] as a blindfl passive party's CELU table holds it
    key = PublicKey(mpz(1000003) * mpz(1000033), "bank")
    rows = [Paillier(key).encrypt([1, 2]), Paillier(key).encrypt([3, 4])]
    cached = CipherMatrix(rows, 2, key, 5, 20)
    state = StateDir(tmp_path)
    state.save(Checkpoint("job", "h", "shop", 10, {"entries": [[7, cached]]}))
    # Execute
    back = state.load("job", 10, "h", "shop").state["entries"][0][1]
    # Assert
    assert (back.rows, back.cols, back.slots, back.scale_bits) == (rows, 2, 5, 20)
    assert (back.key.n, back.key_owner) == (key.n, "bank")


def final_state(state: StateDir, rnd: int, spec) -> dict:
    return state.load("job", rnd, spec.spec_hash(), "bank").state["trainer"]


def test_a_resumed_split_job_ends_exactly_where_an_uninterrupted_one_ends(tmp_path) -> None:
    # Prepare
    spec = parse_spec(SPEC)
    whole = {p: StateDir(tmp_path / "whole" / p) for p in ("bank", "shop")}
    broken = {p: StateDir(tmp_path / "broken" / p) for p in ("bank", "shop")}
    uninterrupted = run_inprocess(spec, breast(), states=whole)
    total = uninterrupted["bank"]["rounds"]
    # Execute: the run dies in round 21 (after the checkpoint of round 20), then resumes
    hub = InProcessHub()

    def die(direction, sender, receiver, tag, data) -> None:
        if tag == "train/r21/grad":
            hub.close("killed")

    with pytest.raises(ChannelClosed):
        run_inprocess(spec, breast(), hook=die, states=broken, hub=hub)
    assert broken["bank"].rounds("job")[-1] == 20 and broken["shop"].rounds("job")[-1] == 20
    resumed = run_inprocess(spec, breast(), states=broken, resume_round=20)
    # Assert: the same weights, optimiser state, metrics and history, bit for bit
    a, b = final_state(whole["bank"], total, spec), final_state(broken["bank"], total, spec)
    for part in ("top", "bottom"):
        for name, tensor in a[part].items():
            assert torch.equal(tensor, b[part][name]), (part, name)
    shop = [final_state_of(s, total, spec) for s in (whole["shop"], broken["shop"])]
    for name, tensor in shop[0]["bottom"].items():
        assert torch.equal(tensor, shop[1]["bottom"][name]), name
    assert resumed["bank"]["metrics"] == uninterrupted["bank"]["metrics"]
    assert resumed["bank"]["history"][-1]["auc"] == uninterrupted["bank"]["history"][-1]["auc"]
    assert [h["round"] for h in resumed["bank"]["history"]] == [
        h["round"] for h in uninterrupted["bank"]["history"]
    ]
    assert resumed["bank"]["local_updates"] == uninterrupted["bank"]["local_updates"]


def final_state_of(state: StateDir, rnd: int, spec) -> dict:
    return state.load("job", rnd, spec.spec_hash(), "shop").state["trainer"]


def test_resuming_on_changed_rows_is_refused(tmp_path) -> None:
    spec = parse_spec(SPEC)
    states = {p: StateDir(tmp_path / p) for p in ("bank", "shop")}
    run_inprocess(spec, breast(), states=states)
    total = states["bank"].rounds("job")[-1]
    fewer = breast()
    host = tmp_path / "host.csv"
    lines = fewer["shop"]["d"].path
    rows = open(lines).read().splitlines()
    host.write_text("\n".join(rows[:-5]) + "\n")
    fewer["shop"]["d"] = fewer["shop"]["d"].model_copy(update={"path": str(host)})
    with pytest.raises(DataChanged, match="aligned rows differ"):
        run_inprocess(spec, fewer, states=states, resume_round=total)


def test_resuming_on_changed_values_under_the_same_ids_is_refused(tmp_path) -> None:
    # Prepare: a run that dies after the checkpoint of round 20
    spec = parse_spec(SPEC)
    states = {p: StateDir(tmp_path / p) for p in ("bank", "shop")}
    hub = InProcessHub()

    def die(direction, sender, receiver, tag, data) -> None:
        if tag == "train/r21/grad":
            hub.close("killed")

    with pytest.raises(ChannelClosed):
        run_inprocess(spec, breast(), hook=die, states=states, hub=hub)
    # the shop's values change meanwhile: the same ids, one column scaled
    changed = breast()
    host = tmp_path / "host.csv"
    host.write_text(scaled(open(changed["shop"]["d"].path).read()))
    changed["shop"]["d"] = changed["shop"]["d"].model_copy(update={"path": str(host)})
    # Execute / Assert: refused before a round trains, naming the party and the fix; the
    # job pauses (the data can be put back), it does not fail
    with pytest.raises(DataChanged, match="party 'shop': its rows hold other values") as info:
        run_inprocess(spec, changed, states=states, resume_round=20)
    assert "put back the data the job began with" in str(info.value)
    assert info.value.pauses
    assert str(host) not in info.value.public
    # the checkpoints stay: with the data put back, the job resumes
    run_inprocess(spec, breast(), states=states, resume_round=20)
    assert ModelStore(states["shop"]).load("job", "shop")[1]["preprocess"]
