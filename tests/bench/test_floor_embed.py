"""bench/floor.py's `EmbedCounter` against the real Embed-MatMul layer: each party's engine
counts what it does (`SecureConfig.counts`) through a setup, one training step and one
forward-only step with small INSECURE test keys, and the counter, which knows only the
shapes, must predict every count exactly, party by party."""

from __future__ import annotations

import numpy as np
import pytest
from vfl.secure.channel import InProcessHub
from vfl.secure.paillier.counters import OpCounts
from vfl.secure.paillier.encoding import encode
from vfl.secure.paillier.keys import generate_keypair
from vfl.secure.source_layers.embed import ActiveEmbedLayer, PassiveEmbedLayer

from tests.support.bench import bench_module
from tests.support.secure import TEST_PARTIES, config_for_tests, run_parties

LR = 0.05


@pytest.fixture(scope="module")
def floor():
    yield from bench_module("floor")


@pytest.fixture(scope="module")
def keys():
    config = config_for_tests()
    return {party: generate_keypair(party, config) for party in TEST_PARTIES}


def engine_view(counts) -> dict[str, int]:
    """A counter's `Counts` as the engine's `OpCounts` names them."""
    return {
        "encryptions": counts.fresh,
        "rerandomizations": counts.obfuscators,
        "decryptions": counts.decryptions,
        "products": counts.terms,
    }


def since(counts: OpCounts, before: dict[str, int]) -> dict[str, int]:
    return {name: value - before[name] for name, value in counts.snapshot().items()}


@pytest.mark.parametrize(
    ("passives", "vocab", "emb_dim", "out_dim", "n"),
    [
        pytest.param(1, [10] * 26, 8, 16, 12, id="ctr-shape"),
        pytest.param(2, [5, 7, 3], 3, 4, 9, id="two-passive-parties"),
        pytest.param(1, [4, 3], 20, 4, 6, id="fields-span-two-plaintexts"),
    ],
)
def test_counter_matches_the_layer(floor, keys, passives, vocab, emb_dim, out_dim, n):
    # Prepare: the parties' layers, each with its own operation counts
    ids = [f"A{i + 1}" for i in range(passives)]
    counts = {pid: OpCounts() for pid in ["B", *ids]}
    hub = InProcessHub()
    layers = [
        PassiveEmbedLayer(
            hub.channel(pid),
            "B",
            vocab,
            emb_dim,
            out_dim,
            config_for_tests(counts=counts[pid]),
            7,
            keypair=keys[pid],
        )
        for pid in ids
    ]
    active = ActiveEmbedLayer(
        hub.channel("B"),
        ids,
        {pid: vocab for pid in ids},
        emb_dim,
        out_dim,
        config_for_tests(counts=counts["B"]),
        3,
        keypair=keys["B"],
    )
    counter = floor.EmbedCounter(1024, out_dim, emb_dim, len(vocab), passives)
    rng = np.random.default_rng(1)
    codes = np.stack([rng.integers(0, v, size=n) for v in vocab], axis=1)
    grad = rng.uniform(0.5, 1.0, (n, out_dim)) * rng.choice([-1.0, 1.0], (n, out_dim))
    grad[0, 0] = 0.0  # a zero entry of lr G is no term of lr G [[W^T]]
    step_nonzeros = int(np.count_nonzero(encode(LR * grad, counter.params.grad_bits)))

    def step(tag: str, train: bool) -> dict[str, dict[str, int]]:
        before = {pid: c.snapshot() for pid, c in counts.items()}
        calls = [lambda p=p: p.forward(tag, codes) for p in layers]
        run_parties(lambda: active.forward(tag), *calls)
        if train:
            calls = [lambda p=p: p.backward(tag, LR) for p in layers]
            run_parties(lambda: active.backward(tag, grad, LR), *calls)
        return {pid: since(c, before[pid]) for pid, c in counts.items()}

    try:
        # Execute
        run_parties(lambda: active.setup("emb"), *[lambda p=p: p.setup("emb") for p in layers])
        measured = {"setup": {pid: c.snapshot() for pid, c in counts.items()}}
        measured["train"] = step("train/r1/emb", True)
        measured["forward"] = step("val/r1/emb", False)
    finally:
        active.close()
        for layer in layers:
            layer.close()

    # Assert
    expected = {
        "train": counter.step(n, train=True, step_nonzeros=step_nonzeros),
        "forward": counter.step(n, train=False),
    }
    if passives == 1:  # K >= 2 adds the pair seeds, which the counter leaves out
        expected["setup"] = counter.setup(vocab)
    for what, by_role in expected.items():
        assert measured[what]["B"] == engine_view(by_role["active"]), what
        for pid in ids:
            assert measured[what][pid] == engine_view(by_role["passive"]), (what, pid)


def test_counter_at_the_ctr_shape_of_the_benchmark(floor):
    """2048-bit keys, 26 fields of k = 8, h = 16, N = 256 (bench/secure_epoch.py --cases
    ctr): the layouts and the per-step counts the benchmark's floor rests on."""
    counter = floor.EmbedCounter(2048, 16, 8, 26)
    assert counter.layouts == {
        "e_cols": 7,  # 4 fields of 8 in 32 slots of 63 bits
        "e_slots": 32,
        "segments": 26,
        "h_cols": 1,
        "h_slots": 18,
        "d_cols": 11,  # 208 values in 19 slots of 104 bits
        "d_slots": 19,
    }
    step = counter.step(256, train=True)
    a, b = step["passive"], step["active"]
    # e 1792 + c 256 + z 256 + de 2816 + y 208 decryptions, as many re-randomisations
    assert (a.decryptions, b.decryptions) == (256 + 2816, 1792 + 256 + 208)
    assert (a.obfuscators, b.obfuscators) == (1792 + 256 + 208, 256 + 2816)
    # fresh: m3 256, pb 208, st 6656 at B; phi 208, phit 16 x 11 at A
    assert (a.fresh, b.fresh) == (208 + 176, 256 + 208 + 6656)
    assert a.ciphertexts + b.ciphertexts == 1792 + 3 * 256 + 3 * 208 + 2816 + 6656 + 176
