"""The Embed-MatMul source layer over the in-process channel, parties as threads, against
plaintext numpy training (lookup, matmul, SGD) from the same initial Q = Q^A + Q^B and
W = W^A + W^B."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from vfl.proto import common_pb2
from vfl.secure.channel import InProcessHub
from vfl.secure.config import SecureConfig
from vfl.secure.errors import PayloadError, SecureError
from vfl.secure.paillier.cipher_matrix import CipherMatrix
from vfl.secure.paillier.encoding import to_signed
from vfl.secure.paillier.keys import generate_keypair
from vfl.secure.source_layers.embed import (
    ActiveEmbedLayer,
    PassiveEmbedLayer,
    VocabularyError,
    link as embed_link,
)
from vfl.secure.source_layers.embed.packing import (
    FieldLayout,
    SlotLayout,
    exact_matmul,
    round_shift,
    uniform_ints,
)
from vfl.secure.source_layers.matmul import ActiveSourceLayer
from vfl.secure.wire.ciphertexts import ciphertexts_to_payload

from tests.support.embed_layer import LR, Job, close, draw_codes, make_job, secure_step
from tests.support.numeric import assert_close
from tests.support.reveal_embed import reveal_embed_for_tests
from tests.support.secure import config_for_tests

RTOL = 1e-4


def plain_step(model, codes, target, emb_dim) -> tuple[np.ndarray, np.ndarray]:
    """Plaintext lookup + matmul + SGD on `model`; returns (Z, G)."""
    looked = {
        pid: np.concatenate([q[c[:, f]] for f, q in enumerate(model[f"Q/{pid}"])], axis=1)
        for pid, c in codes.items()
    }
    z = sum(e @ model[f"W/{pid}"] for pid, e in looked.items())
    grad = (z - target) / len(z)
    for pid, e in looked.items():
        d_e = grad @ model[f"W/{pid}"].T
        model[f"W/{pid}"] = model[f"W/{pid}"] - LR * e.T @ grad
        for f, q in enumerate(model[f"Q/{pid}"]):
            np.add.at(q, codes[pid][:, f], -LR * d_e[:, f * emb_dim : (f + 1) * emb_dim])
    return z, grad


def assert_model(job: Job) -> None:
    revealed = reveal_embed_for_tests(job.active, job.passives)
    for p in job.passives:
        pid = p.channel.party_id
        for secure, plain in zip(revealed[f"Q/{pid}"], job.model[f"Q/{pid}"], strict=True):
            assert_close(secure, plain, RTOL)
        for name in ("W", "W_copy", "W_T_copy"):
            assert_close(revealed[f"{name}/{pid}"], job.model[f"W/{pid}"], RTOL)


@pytest.mark.parametrize(
    ("k_parties", "emb_dim", "vocab", "steps"),
    [
        pytest.param(1, 3, None, 3, id="K1"),
        pytest.param(2, 3, None, 3, id="K2"),
        pytest.param(1, 20, {"A1": [4, 3]}, 2, id="K1-fields-span-two-plaintexts"),
    ],
)
def test_training_matches_plaintext_training(test_keys, k_parties, emb_dim, vocab, steps):
    check_training(make_job(test_keys, k_parties, emb_dim=emb_dim, vocab=vocab), emb_dim, steps)


@pytest.mark.parametrize("fresh", ["short", "statistical"])
def test_both_kinds_of_fresh_obfuscators_train_alike(test_keys, fresh):
    """Own pools (q_b, w_b, m3, pb, st at B; w_a, wt_a, phi, phit at A_k) make
    short-exponent obfuscators by default; peer pools (e, c, z, y, de) are statistical."""
    job = make_job(test_keys, 2, config=config_for_tests(fresh_obfuscators=fresh))
    for layer in (job.active, *job.passives):
        crypto = layer._crypto  # noqa: SLF001 - which pools
        assert crypto.own.pool.short_exponent is (fresh == "short")
        assert not any(peer.pool.short_exponent for peer in crypto.peers.values())
    check_training(job, 3, 2)


@pytest.mark.parametrize("hub", ["grpc"], indirect=True)
@pytest.mark.parametrize("k_parties", [1, 2])
def test_training_over_real_grpc_matches_plaintext_training(test_keys, hub, k_parties):
    check_training(make_job(test_keys, k_parties, hub=hub), 3, 2)


def check_training(job: Job, emb_dim: int, steps: int) -> None:
    # Prepare
    rng = np.random.default_rng(11)
    # Execute / Assert: outputs every step, Q and W after the first and the last SGD step
    for step in range(steps):
        codes, target = draw_codes(rng, job, 8), rng.normal(size=(8, 4))
        z, _ = secure_step(job, f"train/b{step}", codes, target)
        assert_close(z, plain_step(job.model, codes, target, emb_dim)[0], RTOL)
        if step in (0, steps - 1):
            assert_model(job)
    close(job)


def test_repeated_codes_accumulate_and_only_looked_up_rows_change(test_keys):
    # Prepare: every row of the batch uses code 1 of field 0 and codes {0, 2} of field 1
    job = make_job(test_keys, vocab={"A1": [4, 5]})
    rng = np.random.default_rng(5)
    codes = {"A1": np.array([[1, 2 * (i % 2)] for i in range(8)])}
    tables = job.passives[0]._state.q_b.tables
    before = [[list(row) for row in table] for table in tables]
    # Execute
    target = rng.normal(size=(8, 4))
    secure_step(job, "b0", codes, target)
    plain_step(job.model, codes, target, 3)
    # Assert: the sums of eight and of four updates per row, nothing else touched
    assert_model(job)
    changed = [[v for v, row in enumerate(t) if row != before[f][v]] for f, t in enumerate(tables)]
    assert changed == [[1], [0, 2]]
    close(job)


def test_only_ciphertexts_keys_and_setup_messages_cross_the_wire(test_keys):
    # Prepare / Execute: setup and one step with two passive parties
    job = make_job(test_keys, k_parties=2)
    rng = np.random.default_rng(2)
    codes, target = draw_codes(rng, job, 6), rng.normal(size=(6, 4))
    z, grad = secure_step(job, "train/b0", codes, target)
    plain_step(job.model, codes, target, 3)
    # Assert: payload kinds and steps
    kinds: dict[str, set[str]] = {}
    for tag, _, data in job.envelopes:
        kind = common_pb2.Payload.FromString(data).WhichOneof("kind")
        kinds.setdefault(kind, set()).add(tag.split("/")[-1])
    assert set(kinds) == {"ciphertexts", "public_key", "layer_setup"}
    assert kinds["layer_setup"] == {"params", "vocab"}
    steps = {"e", "c", "z", "m3", "pb", "de", "st", "y", "phi", "phit", "w_a", "wt_a", "w_b"}
    assert steps <= kinds["ciphertexts"]
    # Assert: no float64 value, nor float32 row, of Q, W or G anywhere in the bytes
    blob = b"".join(data for _, _, data in job.envelopes)
    updated = [m for v in job.model.values() for m in (v if isinstance(v, list) else [v])]
    for matrix in [*job.initial, *updated, grad, LR * grad, z]:
        for row in np.atleast_2d(matrix):
            for order in "<>":
                assert row.astype(f"{order}f4").tobytes() not in blob
                assert all(v.tobytes() not in blob for v in row.astype(f"{order}f8"))
    close(job)


def test_active_party_decrypts_only_the_aggregate_with_two_passive_parties(test_keys, monkeypatch):
    # Prepare: record the masks M_k of the cross terms c_k
    job = make_job(test_keys, k_parties=2)
    masks: list[list[int]] = []

    def recording(count: int, bits: int) -> list[int]:
        masks.append(uniform_ints(count, bits))
        return masks[-1]

    monkeypatch.setattr(embed_link, "uniform_ints", recording)
    rng = np.random.default_rng(3)
    # Execute
    z, _ = secure_step(job, "b0", draw_codes(rng, job, 6), np.zeros((6, 4)))
    # Assert: Dec(z_k) + M_k alone is uniform mod n; only the sum decodes to Z
    own, n = job.active._crypto.own, int(job.active._crypto.own.pk.n)
    alone = []
    for pid, mask in zip(("A1", "A2"), masks, strict=True):
        data = next(d for tag, sender, d in job.envelopes if tag == "b0/z" and sender == pid)
        blob = common_pb2.Payload.FromString(data).ciphertexts.blob
        cts = [int.from_bytes(blob[i : i + 256], "big") for i in range(0, len(blob), 256)]
        alone.append([(m + r) % n for m, r in zip(own.decrypt(cts), mask, strict=True)])
        assert min(abs(to_signed(v, n)).bit_length() for v in alone[-1]) > 900
    total = [to_signed(a + b, n) for a, b in zip(*alone, strict=True)]
    h_lay = job.active.h_lay
    decoded = np.array(
        h_lay.unpack([total[i : i + h_lay.cols] for i in range(0, 6 * h_lay.cols, h_lay.cols)])
    )
    assert_close(decoded * 2.0**-52, z, 1e-12)
    close(job)


def test_codes_outside_the_vocabulary_raise_a_named_error_before_sending(test_keys):
    job = make_job(test_keys)
    passive, sent = job.passives[0], len(job.envelopes)
    for bad in ([[0, 7, 0]], [[0, 0, -1]], [[0, 0]], [[0.0, 1.0, 2.0]]):
        with pytest.raises(VocabularyError):
            passive.forward("b0", np.array(bad))
    assert issubclass(VocabularyError, ValueError) and issubclass(VocabularyError, SecureError)
    assert len(job.envelopes) == sent
    close(job)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("width", 128, "width 128 bytes"),
        ("blob", b"", "truncated"),
        ("shape", [5, 1], r"shape \[6, 1\]"),
        ("key_owner", "A2", "'A2'"),
    ],
)
def test_malformed_ciphertexts_from_a_peer_raise_payload_error(test_keys, field, value, message):
    # Prepare: a passive party that receives a forged c, an active one a forged e
    job = make_job(test_keys)
    he_a, own_b = job.active._links["A1"].he, job.active._crypto.own
    params, codes = job.active.params, np.zeros((6, 3), dtype=int)
    h_cols, e_cols = params.h_layout().cols, params.e_layout(3).cols
    for he, tag, cols, slots, scale, sender in [
        (he_a, "b0/c", h_cols, params.h_slots, params.output_bits, job.active),
        (own_b, "b1/e", e_cols, params.e_slots, params.feature_bits, job.passives[0]),
    ]:
        payload = ciphertexts_to_payload(
            CipherMatrix([he.encrypt([1] * cols)] * 6, cols, he.pk, slots, scale)
        )
        if field == "shape":
            del payload.ciphertexts.shape[:]
            payload.ciphertexts.shape.extend([value[0], cols])
            payload.ciphertexts.blob = payload.ciphertexts.blob[: value[0] * cols * he.pk.width]
        else:
            setattr(payload.ciphertexts, field, value)
        sender.channel.send("A1" if tag == "b0/c" else "B", tag, payload)
    # Execute / Assert
    with pytest.raises(PayloadError, match=message):
        job.passives[0].forward("b0", codes)
    if field != "shape":  # the active party learns N from e
        with pytest.raises(PayloadError, match=message):
            job.active.forward("b1")
    close(job)


def test_setup_rejects_other_vocabularies_and_bad_configurations(test_keys):
    hub = InProcessHub()
    active = ActiveEmbedLayer(
        hub.channel("B"),
        ["A1"],
        {"A1": [5, 7]},
        3,
        4,
        config_for_tests(),
        0,
        keypair=test_keys["B"],
    )
    passive = PassiveEmbedLayer(
        hub.channel("A1"), "B", [5, 8], 3, 4, config_for_tests(), 0, keypair=test_keys["A1"]
    )
    raised: list[BaseException] = []
    thread = threading.Thread(target=lambda: _capture(raised, lambda: active.setup("s")))
    thread.start()
    with pytest.raises(PayloadError, match=r"expects 2 fields of sizes \[5, 7\]"):
        passive.setup("s")
    hub.close("passive party refused the setup")
    thread.join()
    with pytest.raises(ValueError, match="fields_per_passive"):
        ActiveEmbedLayer(hub.channel("B"), ["A1"], {}, 3, 4, config_for_tests(), 0)


def _capture(raised: list[BaseException], call) -> None:
    try:
        call()
    except SecureError as exc:
        raised.append(exc)


def test_the_embed_layer_shares_the_matmul_layers_key_pair(test_keys):
    hub = InProcessHub()
    keypair = test_keys["B"]
    matmul = ActiveSourceLayer(
        hub.channel("B"), ["A1"], 4, 5, config_for_tests(), 0, keypair=keypair
    )
    embed = ActiveEmbedLayer(
        hub.channel("B"), ["A1"], {"A1": [5]}, 3, 5, config_for_tests(), 0, keypair=keypair
    )
    assert embed._crypto.keypair is matmul._crypto.keypair is keypair
    with pytest.raises(SecureError, match="call setup"):
        embed.forward("b0")
    matmul.close()
    embed.close()


def test_layouts_round_trip_and_exact_products():
    rng = np.random.default_rng(0)
    layout = FieldLayout(field_count=4, emb_dim=5, slot_bits=63, slots=12)  # 2 per plaintext
    values = rng.integers(-(2**61), 2**20, size=(3, 20)).tolist()
    assert layout.unpack(layout.pack(values)) == values
    assert [len(parts) for parts in FieldLayout(2, 20, 63, 12).segments] == [2, 2]
    wide = SlotLayout(width=7, slot_bits=104, slots=3)
    big = [[int(v) << 40 for v in row] for row in rng.integers(-(2**61), 2**61, size=(2, 7))]
    assert wide.unpack(wide.pack(big)) == big
    with pytest.raises(ValueError, match="overflows"):
        wide.unpack([[1 << 400, 0, 0]])
    a = rng.integers(-(2**62), 2**62, size=(5, 9))
    b = rng.integers(-(2**40), 2**40, size=(9, 4))
    assert (exact_matmul(a, b) == a.astype(object).dot(b.astype(object))).all()
    halves = np.array([[5 << 39, -(5 << 39), 3]], dtype=object)
    assert round_shift(halves, 40).tolist() == [[3, -2, 0]]


@pytest.mark.slow
def test_one_step_with_2048_bit_keys_matches_plaintext():
    config = SecureConfig(workers=1, obfuscator_pool=0, background_refill=False, timeout_s=120)
    keys = {p: generate_keypair(p, config) for p in ("B", "A1")}
    job = make_job(keys, emb_dim=2, h=3, vocab={"A1": [3, 4]}, config=config)
    assert job.active._crypto.own.pk.bits == 2048
    rng = np.random.default_rng(9)
    codes, target = draw_codes(rng, job, 4), rng.normal(size=(4, 3))
    z, _ = secure_step(job, "b0", codes, target)
    assert_close(z, plain_step(job.model, codes, target, 2)[0], RTOL)
    assert_model(job)
    close(job)


def test_a_recording_passive_party_sees_each_plaintext_it_decrypts(test_keys):
    # Prepare: a passive party whose view is recorded (`vfl attack`)
    job = make_job(test_keys, vocab={"A1": [4, 5]})
    seen: dict[str, list] = {}
    job.passives[0].on_decrypt = lambda tag, rows: seen.setdefault(tag, [list(r) for r in rows])
    rng = np.random.default_rng(3)
    # Execute
    secure_step(job, "b0", draw_codes(rng, job, 8), rng.normal(size=(8, 4)))
    # Assert: the forward cross term c and the masked embedding step de, a row per row
    assert sorted(seen) == ["b0/c", "b0/de"]
    assert [len(seen[t]) for t in ("b0/c", "b0/de")] == [8, 8]
    assert all(isinstance(v, int) for row in seen["b0/de"] for v in row)
    close(job)
