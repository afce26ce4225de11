"""The MatMul source layer over the in-process channel, parties as threads, against
plaintext numpy training with the same initial weights W = U + V."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import scipy.sparse as sp
from vfl.proto import common_pb2
from vfl.secure.channel import InProcessHub
from vfl.secure.config import SecureConfig
from vfl.secure.errors import PaillierKeyError, PayloadError, SecureError
from vfl.secure.paillier.cipher_matrix import CipherMatrix
from vfl.secure.paillier.encoding import to_signed
from vfl.secure.paillier.keys import generate_keypair
from vfl.secure.source_layers.matmul import ActiveSourceLayer, PassiveSourceLayer
from vfl.secure.wire.ciphertexts import ciphertexts_to_payload

from tests.support.matmul_layer import (
    LR,
    RTOL,
    batch,
    close,
    make_job,
    plain_forward,
    plain_step,
    secure_step,
)
from tests.support.numeric import assert_close
from tests.support.reveal import reveal_weights_for_tests
from tests.support.secure import config_for_tests, run_parties


@pytest.mark.parametrize(
    ("sparse", "k", "h"), [(False, 1, 5), (True, 1, 20), (False, 2, 20), (True, 2, 5)]
)
def test_training_matches_plaintext_training(test_keys, hub, sparse, k, h):
    check_training(make_job(test_keys, k=k, h=h, hub=hub), sparse, h)


@pytest.mark.parametrize("fresh", ["short", "statistical"])
def test_both_kinds_of_fresh_obfuscators_train_alike(test_keys, fresh):
    """B's and A_k's own pools make short-exponent obfuscators by default (the keys have
    h_s); the peers' pools (m1, m2) are statistical either way."""
    config = config_for_tests(fresh_obfuscators=fresh)
    job = make_job(test_keys, k=2, h=5, config_a=config, config_b=config)
    for layer in (job.active, *job.passives):
        crypto = layer._crypto  # noqa: SLF001 - which pools
        assert crypto.own.pool.short_exponent is (fresh == "short")
        assert not any(peer.pool.short_exponent for peer in crypto.peers.values())
    check_training(job, True, 5)


@pytest.mark.parametrize(
    ("sparse", "binary", "k"), [(False, False, 1), (True, False, 2), (True, True, 1)]
)
def test_adagrad_steps_match_plaintext_preconditioned_training(test_keys, sparse, binary, k):
    """B's column step sizes folded into m3, A's per-feature factors in the backward
    product, Adagrad on B's share and bias: the secure layer tracks the same rule in
    plaintext (binary features at feature_bits 0: factors rounded to integers)."""
    config = config_for_tests(feature_bits=0) if binary else None
    job = make_job(test_keys, k=k, h=5, config_a=config, rule="adagrad")
    check_training(job, sparse, 5, binary)


def check_training(job, sparse: bool, h: int, binary: bool = False) -> None:
    # Prepare
    rng = np.random.default_rng(11)
    # Execute / Assert: forward outputs and weights after 1 and after 3 SGD steps
    for step in range(3):
        xs, x_b = batch(rng, job, 16, sparse, binary)
        target = rng.normal(size=(16, h))
        z = secure_step(job, f"train/b{step}", xs, x_b, target)
        assert_close(z, plain_step(job.weights, xs, x_b, target, job.reference), RTOL)
        if step in (0, 2):
            revealed = reveal_weights_for_tests(job.active, job.passives)
            for name, expected in job.weights.items():
                assert_close(revealed[name], expected, RTOL)
    close(job)


def test_only_ciphertexts_keys_and_setup_messages_cross_the_wire(test_keys):
    job = make_job(test_keys, k=2)
    rng = np.random.default_rng(2)
    xs, x_b = batch(rng, job, 8, sparse=True)
    secure_step(job, "train/b0", xs, x_b, np.zeros((8, 5)))
    kinds = {}
    for tag, _, data in job.envelopes:
        payload = common_pb2.Payload.FromString(data)
        kinds.setdefault(payload.WhichOneof("kind"), set()).add(tag.split("/")[-1])
    assert set(kinds) <= {"ciphertexts", "public_key", "layer_setup"}
    assert kinds["layer_setup"] == {"params"}
    assert {"m1", "m2", "m3"} <= kinds["ciphertexts"]
    close(job)


def test_active_party_decrypts_only_the_aggregate_with_two_passive_parties(test_keys):
    job = make_job(test_keys, k=2)
    xs, x_b = batch(np.random.default_rng(3), job, 8, sparse=False)
    secure_step(job, "train/b0", xs, x_b, np.zeros((8, 5)))
    own, packer = job.active._crypto.own, job.active.packer
    m2 = [d for tag, to, d in job.envelopes if tag.endswith("/m2")]
    assert len(m2) == 2
    for data in m2:  # each m2 alone is uniform mod n, far above the masked partial sums
        blob = common_pb2.Payload.FromString(data).ciphertexts.blob
        cts = [int.from_bytes(blob[i : i + 256], "big") for i in range(0, len(blob), 256)]
        sizes = [abs(to_signed(m, int(own.pk.n))).bit_length() for m in own.decrypt(cts)]
        assert min(sizes) > packer.mask_bits + 20  # K=1: below mask_bits + 2
    close(job)


def test_sparse_update_touches_only_present_feature_rows(test_keys):
    job = make_job(test_keys, d_a=10)
    passive = job.passives[0]
    x = np.zeros((8, 10))
    x[:, [1, 4]] = np.random.default_rng(4).normal(size=(8, 2))
    before = [list(row) for row in passive._state.v_a.rows]
    secure_step(job, "train/b0", {"A1": sp.csr_matrix(x)}, np.ones((8, 4)), np.zeros((8, 5)))
    changed = [j for j, row in enumerate(passive._state.v_a.rows) if row != before[j]]
    assert changed == [1, 4]
    close(job)


def test_cached_encrypted_step_can_be_reapplied(test_keys):
    # Prepare
    job = make_job(test_keys)
    passive = job.passives[0]
    rng = np.random.default_rng(5)
    xs, x_b = batch(rng, job, 8, sparse=False)
    target = rng.normal(size=(8, 5))
    # Execute: one step, then re-apply its cached [[eta G]] twice (object and payload)
    calls = [lambda: passive.forward("b0", xs["A1"])]
    z = run_parties(lambda: job.active.forward("b0", x_b), *calls)[0]
    grad = (z - target) / 8
    cached = run_parties(
        lambda: passive.backward("b0", LR), lambda: job.active.backward("b0", grad, LR)
    )[0]
    assert isinstance(cached, CipherMatrix)
    passive.backward_cached(cached, xs["A1"], LR)
    passive.backward_cached(ciphertexts_to_payload(cached), xs["A1"], LR)
    # Assert: W_A moved by three steps, the active party's weights by one
    plain_step(job.weights, xs, x_b, target)
    job.weights["W_A/A1"] -= 2 * LR * xs["A1"].T @ grad
    revealed = reveal_weights_for_tests(job.active, job.passives)
    for name, expected in job.weights.items():
        assert_close(revealed[name], expected, RTOL)
    close(job)


def test_overlapping_forward_steps_give_each_batch_its_own_z(test_keys):
    # Prepare: two passive parties (zero-sum masks), three batches of different sizes
    job = make_job(test_keys, k=2, h=20)
    rng = np.random.default_rng(8)
    batches = [batch(rng, job, n, sparse=False) for n in (8, 5, 8)]
    tags = [f"predict/b{i}" for i in range(3)]

    def active() -> list[np.ndarray]:
        out = []
        for i, (tag, (_, x_b)) in enumerate(zip(tags, batches, strict=True)):
            job.active.start_forward(tag, x_b)  # m1 of batch i goes out before z of i-1
            if i:
                out.append(job.active.finish_forward(tags[i - 1]))
        return [*out, job.active.finish_forward(tags[-1])]

    def passive(p) -> None:
        for tag, (xs, _) in zip(tags, batches, strict=True):
            p.forward(tag, xs[p.channel.party_id])

    # Execute
    zs = run_parties(active, *[lambda p=p: passive(p) for p in job.passives])[0]
    # Assert
    for z, (xs, x_b) in zip(zs, batches, strict=True):
        assert_close(z, plain_forward(job.weights, xs, x_b), RTOL)
    with pytest.raises(SecureError, match="no step"):
        job.active.finish_forward(tags[0])
    close(job)


def test_binary_features_and_an_active_party_without_features(test_keys):
    job = make_job(test_keys, d_b=0, config_a=config_for_tests(feature_bits=0))
    rng = np.random.default_rng(6)
    for step in range(2):
        xs, x_b = batch(rng, job, 8, sparse=True, binary=True)
        target = rng.normal(size=(8, 5))
        z = secure_step(job, f"b{step}", xs, x_b, target)
        assert_close(z, plain_step(job.weights, xs, x_b, target), RTOL)
    revealed = reveal_weights_for_tests(job.active, job.passives)
    assert_close(revealed["W_A/A1"], job.weights["W_A/A1"], RTOL)
    close(job)


def failing_setup(active: ActiveSourceLayer, passive: PassiveSourceLayer, hub: InProcessHub):
    """Run a setup that the passive party must refuse; return what the active one raised."""
    raised: list[BaseException] = []

    def run_active() -> None:
        try:
            active.setup("setup")
        except SecureError as exc:
            raised.append(exc)

    thread = threading.Thread(target=run_active)
    thread.start()
    try:
        passive.setup("setup")
    finally:
        hub.close("passive party refused the setup")
        thread.join()
    return raised


def test_setup_rejects_a_layer_of_another_width(test_keys):
    hub = InProcessHub()
    active = ActiveSourceLayer(
        hub.channel("B"), ["A1"], 4, 5, config_for_tests(), 0, keypair=test_keys["B"]
    )
    passive = PassiveSourceLayer(
        hub.channel("A1"), "B", 6, 7, config_for_tests(), 0, keypair=test_keys["A1"]
    )
    with pytest.raises(PayloadError, match="width 5 .* expects width 7"):
        failing_setup(active, passive, hub)


def test_setup_rejects_a_peer_key_below_the_minimum(test_keys):
    hub = InProcessHub()
    active = ActiveSourceLayer(
        hub.channel("B"), ["A1"], 4, 5, config_for_tests(), 0, keypair=test_keys["B"]
    )
    strict = SecureConfig(workers=1, obfuscator_pool=0, background_refill=False)
    passive = PassiveSourceLayer(hub.channel("A1"), "B", 6, 5, strict, 0, keypair=test_keys["A1"])
    with pytest.raises(PaillierKeyError, match="1024 bits; the minimum is 2048"):
        failing_setup(active, passive, hub)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [("width", 128, "width 128 bytes"), ("blob", b"", "truncated"), ("key_owner", "A2", "'A2'")],
)
def test_a_malformed_m1_is_rejected_with_a_named_error(test_keys, field, value, message):
    job = make_job(test_keys)
    he = job.active._links["A1"].he
    groups = job.active.params.layout().groups(8)  # batch rows share ciphertexts
    m1 = CipherMatrix([he.encrypt([1])] * groups, 1, he.pk, job.active.packer.slots, 52)
    payload = ciphertexts_to_payload(m1)
    setattr(payload.ciphertexts, field, value)
    job.active.channel.send("A1", "b0/m1", payload)
    with pytest.raises(PayloadError, match=message):
        job.passives[0].forward("b0", np.ones((8, 6)))
    close(job)


def test_bad_local_inputs_raise_before_anything_is_sent(test_keys):
    hub = InProcessHub()
    passive = PassiveSourceLayer(
        hub.channel("A1"), "B", 6, 5, config_for_tests(), 0, keypair=test_keys["A1"]
    )
    with pytest.raises(SecureError, match="call setup"):
        passive.forward("b0", np.ones((8, 6)))
    job = make_job(test_keys)
    with pytest.raises(ValueError, match="NaN"):
        job.passives[0].forward("b0", np.full((8, 6), np.nan))
    with pytest.raises(ValueError, match=r"shape \(N, 4\)"):
        job.active.forward("b0", np.ones((8, 3)))
    with pytest.raises(ValueError, match="passive_ids"):
        ActiveSourceLayer(hub.channel("B"), [], 4, 5, config_for_tests(), 0, keypair=test_keys["B"])
    close(job)


@pytest.mark.slow
def test_one_step_with_2048_bit_keys_matches_plaintext():
    config = SecureConfig(workers=1, obfuscator_pool=0, background_refill=False, timeout_s=60)
    keys = {p: generate_keypair(p, config) for p in ("B", "A1")}
    job = make_job(keys, d_a=5, d_b=3, h=4, config_a=config, config_b=config)
    assert job.active._crypto.own.pk.bits == 2048
    rng = np.random.default_rng(9)
    xs, x_b = batch(rng, job, 8, sparse=False)
    target = rng.normal(size=(8, 4))
    z = secure_step(job, "b0", xs, x_b, target)
    assert_close(z, plain_step(job.weights, xs, x_b, target), RTOL)
    revealed = reveal_weights_for_tests(job.active, job.passives)
    for name, expected in job.weights.items():
        assert_close(revealed[name], expected, RTOL)
    close(job)
