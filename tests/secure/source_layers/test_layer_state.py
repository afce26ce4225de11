"""A source layer's saved state (`state_dict` / `load_state_dict`): plain values only, and
new layer objects loaded from it (with the same key pairs, without any message) compute
exactly the Z the original layers compute, and keep training in step with them."""

from __future__ import annotations

import numpy as np
import pytest
from gmpy2 import mpz
from vfl.party.state.checkpoint_file import Checkpoint, decode_checkpoint, encode_checkpoint
from vfl.secure.channel import InProcessHub
from vfl.secure.errors import PaillierKeyError, SecureError, StateError
from vfl.secure.source_layers.crypto import PartyCrypto
from vfl.secure.source_layers.embed import ActiveEmbedLayer, PassiveEmbedLayer
from vfl.secure.source_layers.matmul import ActiveSourceLayer, PassiveSourceLayer
from vfl.secure.source_layers.state import int_bytes, keypair_from_state, keypair_state

from tests.support import embed_layer, matmul_layer
from tests.support.secure import config_for_tests, run_parties

PLAIN = (int, float, bool, str, bytes, type(None), np.ndarray)


def assert_plain(value, where: str = "state") -> None:
    """Only ints, floats, strings, bytes, arrays, lists and dicts: no objects, no mpz."""
    if isinstance(value, dict):
        for key, item in value.items():
            assert isinstance(key, str), where
            assert_plain(item, f"{where}.{key}")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            assert_plain(item, f"{where}[{i}]")
    else:
        assert isinstance(value, PLAIN) and not isinstance(value, type(mpz(0))), where


def through_a_checkpoint(state: dict) -> dict:
    """The state after a round trip through the checkpoint file format (weights_only)."""
    data = encode_checkpoint(Checkpoint("job", "h", "B", 1, {"layer": state}))
    return decode_checkpoint(data, "test").state["layer"]


def saved(layers) -> list[dict]:
    states = [layer.state_dict() for layer in layers]
    for state in states:
        assert_plain(state)
    return [through_a_checkpoint(state) for state in states]


def restored_matmul(job: matmul_layer.Job, test_keys, states: list[dict], hub, sent: list):
    def hook(direction, sender, receiver, tag, data):
        sent.append(tag)

    config, active = config_for_tests(), job.active
    ids = [p.channel.party_id for p in job.passives]
    new_active = ActiveSourceLayer(
        hub.channel("B", hook),
        ids,
        active.in_dim,
        active.out_dim,
        config,
        3,
        keypair=test_keys["B"],
    )
    new_active.load_state_dict(states[0])
    passives = []
    for pid, old, state in zip(ids, job.passives, states[1:], strict=True):
        layer = PassiveSourceLayer(
            hub.channel(pid, hook), "B", old.in_dim, old.out_dim, config, 7, keypair=test_keys[pid]
        )
        layer.load_state_dict(state)
        passives.append(layer)
    return matmul_layer.Job(new_active, passives, job.weights)


@pytest.mark.parametrize("sparse", [False, True])
def test_a_restored_matmul_layer_computes_the_same_z(test_keys, sparse) -> None:
    # Prepare: two passive parties (zero-sum masks), two training steps, then save
    job = matmul_layer.make_job(test_keys, k=2, h=5)
    rng = np.random.default_rng(4)
    for step in range(2):
        xs, x_b = matmul_layer.batch(rng, job, 8, sparse)
        matmul_layer.secure_step(job, f"train/r{step}", xs, x_b, rng.normal(size=(8, 5)))
    states = saved([job.active, *job.passives])
    # Execute: new layer objects on a new hub load the states; both pairs keep training
    sent: list[str] = []
    restored = restored_matmul(job, test_keys, states, InProcessHub(), sent)
    assert sent == []  # loading exchanges nothing
    outputs = []
    for which in (job, restored):
        zs, local = [], np.random.default_rng(9)
        for step in range(2, 4):
            xs, x_b = matmul_layer.batch(local, which, 8, sparse)
            target = local.normal(size=(8, 5))
            zs.append(matmul_layer.secure_step(which, f"train/r{step}", xs, x_b, target))
        outputs.append(zs)
    # Assert: the same Z, bit for bit, before and after another update
    for z_original, z_restored in zip(*outputs, strict=True):
        assert np.array_equal(z_original, z_restored)
    assert sent and not any(tag.startswith("setup") for tag in sent)
    matmul_layer.close(job)
    matmul_layer.close(restored)


def restored_embed(job: embed_layer.Job, test_keys, states: list[dict]) -> embed_layer.Job:
    hub, config = InProcessHub(), config_for_tests()
    ids = [p.channel.party_id for p in job.passives]
    fields = {p.channel.party_id: list(p.vocab_sizes) for p in job.passives}
    old = job.active
    active = ActiveEmbedLayer(
        hub.channel("B"), ids, fields, old.emb_dim, old.out_dim, config, 3, keypair=test_keys["B"]
    )
    active.load_state_dict(states[0])
    passives = []
    for p, state in zip(job.passives, states[1:], strict=True):
        pid = p.channel.party_id
        layer = PassiveEmbedLayer(
            hub.channel(pid),
            "B",
            fields[pid],
            p.emb_dim,
            p.out_dim,
            config,
            7,
            keypair=test_keys[pid],
        )
        layer.load_state_dict(state)
        passives.append(layer)
    return embed_layer.Job(active, passives, job.model)


def test_a_restored_embed_layer_computes_the_same_z(test_keys) -> None:
    # Prepare
    job = embed_layer.make_job(test_keys, k_parties=2)
    rng = np.random.default_rng(6)
    for step in range(2):
        codes = embed_layer.draw_codes(rng, job, 8)
        embed_layer.secure_step(job, f"train/r{step}", codes, rng.normal(size=(8, 4)))
    states = saved([job.active, *job.passives])
    # Execute
    restored = restored_embed(job, test_keys, states)
    codes = embed_layer.draw_codes(rng, job, 8)
    z_original = run_parties(
        lambda: job.active.forward("val/r3"), *forwards(job.passives, codes, "val/r3")
    )[0]
    z_restored = run_parties(
        lambda: restored.active.forward("val/r3"), *forwards(restored.passives, codes, "val/r3")
    )[0]
    # Assert: the forward pass is exact (the table-step rounding only enters updates)
    assert np.array_equal(z_original, z_restored)
    embed_layer.close(job)
    embed_layer.close(restored)


def forwards(passives, codes, tag):
    return [lambda p=p: p.forward(tag, codes[p.channel.party_id]) for p in passives]


def test_a_state_loads_only_into_a_new_layer_with_its_own_key_pair(test_keys) -> None:
    job = matmul_layer.make_job(test_keys, k=1, h=5)
    state, passive_state = saved([job.active, job.passives[0]])
    config = config_for_tests()

    def active(keypair, out_dim=5):
        return ActiveSourceLayer(
            InProcessHub().channel("B"), ["A1"], 4, out_dim, config, 3, keypair=keypair
        )

    with pytest.raises(StateError, match="another key pair of 'A1'"):
        active(test_keys["A1"]).load_state_dict(state)
    with pytest.raises(StateError, match="another layer or configuration"):
        active(test_keys["B"], out_dim=6).load_state_dict(state)
    with pytest.raises(SecureError, match="replaces setup"):
        job.active.load_state_dict(state)
    broken = {**passive_state, "v_a": {**passive_state["v_a"], "blob": b"\x00" * 10}}
    layer = PassiveSourceLayer(
        InProcessHub().channel("A1"), "B", 6, 5, config, 7, keypair=test_keys["A1"]
    )
    with pytest.raises(StateError, match=r"\[\[V_A\]\] does not hold ciphertexts"):
        layer.load_state_dict(broken)
    with pytest.raises(StateError, match="lacks a field"):
        layer.load_state_dict({k: v for k, v in passive_state.items() if k != "masks"})
    matmul_layer.close(job)


def test_a_key_pair_round_trips_and_is_checked(test_keys) -> None:
    config = config_for_tests()
    state = keypair_state(test_keys["A1"])
    assert_plain(state)
    back = keypair_from_state(through_a_checkpoint(state), "A1", config)
    assert back.public.n == test_keys["A1"].public.n and back.private.p == test_keys["A1"].private.p
    with pytest.raises(StateError, match="belongs to 'A1', not to 'B'"):
        keypair_from_state(state, "B", config)
    with pytest.raises(StateError, match="has 1024 bits, this job uses 2048"):
        keypair_from_state(state, "A1", config_for_tests(key_bits=2048))
    with pytest.raises(PaillierKeyError, match="minimum"):
        keypair_from_state(
            state, "A1", config_for_tests(key_bits=2048, allow_insecure_test_keys=False)
        )


def test_a_key_pair_keeps_its_h_s_and_an_older_state_loads_without_it(test_keys) -> None:
    config, key = config_for_tests(), test_keys["A1"]
    state = through_a_checkpoint(keypair_state(key))
    assert keypair_from_state(state, "A1", config).public.h_s == key.public.h_s is not None
    older = {name: value for name, value in state.items() if name != "h_s"}
    restored = keypair_from_state(older, "A1", config)
    assert restored.public.h_s is None and restored.public == key.public
    crypto = PartyCrypto("A1", config, restored, own_pool=False)  # statistical fallback
    assert not crypto.own.pool.short_exponent
    assert crypto.own.decrypt(crypto.own.encrypt([3])) == [3]
    crypto.close()
    with pytest.raises(StateError, match="corrupt: .*malformed h_s"):
        keypair_from_state({**state, "h_s": b"\x01"}, "A1", config)
    with pytest.raises(StateError, match="corrupt: .*not an n-th residue"):
        keypair_from_state({**state, "h_s": int_bytes(key.public.n + 2)}, "A1", config)
