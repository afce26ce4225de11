"""m1 once per row: steps over precomputed rows send no m1 and still train exactly as the
plaintext model; the per-row values survive a checkpoint; the chunk layout is exact."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from vfl.secure.channel import InProcessHub
from vfl.secure.errors import SecureError
from vfl.secure.source_layers.matmul import ActiveSourceLayer, PassiveSourceLayer
from vfl.secure.source_layers.matmul.row_packing import RowLayout
from vfl.secure.source_layers.matmul.row_shares import RowChunks, group_shifted, worth_it

from tests.support.matmul_layer import RTOL, batch, close, make_job, plain_step, secure_step
from tests.support.numeric import assert_close
from tests.support.reveal import reveal_weights_for_tests
from tests.support.secure import config_for_tests, run_parties


def test_chunks_split_back_into_each_rows_masked_value():
    # Prepare: 1024-bit key, 4 slots of 41 bits per row
    chunks = RowChunks.of(4, 23, 41, 40, 1024)
    assert (chunks.row_bits, chunks.spacing, chunks.rows_per_cipher) == (164, 206, 4)
    rng = np.random.default_rng(1)
    values = [[int(v)] for v in rng.integers(-(2**62), 2**62, size=7)]  # P_i, |P_i| < 2^163
    masks = chunks.masks(7, 1)
    # Execute: the setup plaintexts of P - R, split by the passive party
    plain = [
        [p[0] - r[0]]
        for p, r in zip(
            group_shifted(values, 4, chunks.spacing), chunks.setup_masks(masks), strict=True
        )
    ]
    shares = chunks.split(plain, 7)
    # Assert: S_i + R_i = P_i row by row, whatever the later grouping
    assert [s[0] + r[0] for s, r in zip(shares, masks, strict=True)] == [v[0] for v in values]


def test_setup_pays_from_the_second_use_of_the_rows():
    chunks = RowChunks.of(16, 48, 41, 40, 2048)  # credit layer: 2 rows a setup ciphertext
    assert chunks.rows_per_cipher == 2
    layout = RowLayout(3, 16, 41)  # 3 rows an m1
    assert not worth_it(1, chunks, layout) and worth_it(2, chunks, layout)


@pytest.mark.parametrize(("k", "h", "sparse"), [(1, 5, False), (2, 4, True), (1, 30, False)])
def test_steps_over_precomputed_rows_train_like_plaintext_and_send_no_m1(test_keys, k, h, sparse):
    # Prepare: a set of 20 rows, precomputed; h=30 needs two ciphertexts per row
    job = make_job(test_keys, k=k, h=h)
    rng = np.random.default_rng(4)
    xs_all, x_b_all = batch(rng, job, 20, sparse)
    calls = [lambda p=p: p.precompute("pre", "train", 20) for p in job.passives]
    run_parties(lambda: job.active.precompute("pre", "train", x_b_all), *calls)
    sent_before = len(job.envelopes)
    # Execute: three steps over shuffled subsets of the set
    for step in range(3):
        idx = rng.permutation(20)[:9]
        xs = {pid: x[idx] for pid, x in xs_all.items()}
        x_b, target = x_b_all[idx], rng.normal(size=(9, h))
        z = secure_step(job, f"b{step}", xs, x_b, target, rows=("train", idx))
        # Assert: Z as in plaintext training
        assert_close(z, plain_step(job.weights, xs, x_b, target), RTOL)
    revealed = reveal_weights_for_tests(job.active, job.passives)
    for name, expected in job.weights.items():
        assert_close(revealed[name], expected, RTOL)
    assert not [tag for tag, _, _ in job.envelopes[sent_before:] if tag.endswith("/m1")]
    close(job)


def test_per_row_values_survive_a_checkpoint_and_unknown_sets_are_refused(test_keys):
    # Prepare
    job = make_job(test_keys)
    rng = np.random.default_rng(5)
    xs_all, x_b_all = batch(rng, job, 6, sparse=False)
    passive = job.passives[0]
    run_parties(
        lambda: job.active.precompute("pre", "val", x_b_all),
        lambda: passive.precompute("pre", "val", 6),
    )
    hub = InProcessHub()
    active = ActiveSourceLayer(
        hub.channel("B"), ["A1"], 4, 5, config_for_tests(), 3, keypair=test_keys["B"]
    )
    restored = PassiveSourceLayer(
        hub.channel("A1"), "B", 6, 5, config_for_tests(), 7, keypair=test_keys["A1"]
    )
    active.load_state_dict(job.active.state_dict())
    restored.load_state_dict(passive.state_dict())
    # Execute: the per-row state moves to the restored layers
    active.load_rows_state(job.active.rows_state())
    restored.load_rows_state(passive.rows_state())
    rows = ("val", np.arange(6))
    z = run_parties(
        lambda: active.forward("v", x_b_all, rows),
        lambda: restored.forward("v", xs_all["A1"], rows),
    )[0]
    # Assert
    expected = run_parties(
        lambda: job.active.forward("v0", x_b_all),
        lambda: passive.forward("v0", xs_all["A1"]),
    )[0]
    assert_close(z, expected, RTOL)
    with pytest.raises(SecureError, match="'train' were not precomputed"):
        active.forward("t", x_b_all, ("train", np.arange(6)))
    close(job)
    active.close()
    restored.close()


def test_sparse_rows_of_a_precomputed_set(test_keys):
    config = config_for_tests(feature_bits=0)
    job = make_job(test_keys, d_b=3, config_a=config)
    x = sp.csr_matrix((np.random.default_rng(7).random((5, 6)) > 0.6).astype(float))
    x_b = np.round(np.random.default_rng(8).normal(size=(5, 3)) * 256) / 256
    run_parties(
        lambda: job.active.precompute("pre", "s", x_b),
        lambda: job.passives[0].precompute("pre", "s", 5),
    )
    rows = ("s", np.array([4, 0, 2]))
    z = run_parties(
        lambda: job.active.forward("b", x_b[rows[1]], rows),
        lambda: job.passives[0].forward("b", x[rows[1]], rows),
    )[0]
    w = job.weights
    expected = x_b[rows[1]] @ w["W_B"] + w["bias"] + x[rows[1]] @ w["W_A/A1"]
    assert_close(z, np.asarray(expected), RTOL)
    close(job)
