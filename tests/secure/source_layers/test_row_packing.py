"""Row packing of m1/m2: layout round trips, shifted copies, the cost model, and the
source layer with and without it."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings, strategies as st
from vfl.secure.errors import PayloadError
from vfl.secure.paillier.cipher_matmul import CipherMatmul
from vfl.secure.paillier.encoding import Packer, to_signed
from vfl.secure.paillier.engine import Paillier
from vfl.secure.source_layers.matmul.row_packing import (
    HornerRows,
    RowLayout,
    ShiftedCopies,
    choose_rows,
    packed_products,
)
from vfl.secure.source_layers.matmul.setup import LayerParams

from tests.support.matmul_layer import batch, close, make_job, plain_step, secure_step
from tests.support.numeric import assert_close
from tests.support.secure import config_for_tests


def test_cost_model_packs_narrow_layers_and_keeps_wide_sparse_inputs_apart():
    assert choose_rows(8, 32, 13) == 4  # credit table, h=8: limited by the slots
    assert choose_rows(32, 32, 13) == 1 and choose_rows(40, 32, 13) == 1
    assert choose_rows(1, 32, 73) == 32  # a9a, h=1: Horner's rule keeps shifts at ~N
    assert choose_rows(1, 32, 100_000) == 32  # Horner's cost does not grow with d_A
    assert choose_rows(16, 32, 13) == 2
    assert choose_rows(16, 48, 13) == 3  # the credit layer with 41-bit slots at 2048 bits
    assert choose_rows(8, 32, 13, limit=2) == 2 and choose_rows(8, 32, 13, limit=1) == 1


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 6), st.integers(1, 5), st.integers(1, 20), st.integers(1, 7))
def test_grouping_round_trips(rows, width, n, d):
    layout = RowLayout(rows, width, 62)
    rng = np.random.default_rng(n * 100 + d)
    values = rng.integers(-50, 50, size=(n, width))
    grouped = layout.group_values(values)
    assert grouped.shape == (layout.groups(n), rows * width)
    assert np.array_equal(layout.ungroup(grouped, n), values)
    x = sp.random(n, d, density=0.5, format="csr", random_state=n) * 10
    exps = sp.csr_matrix(np.rint(x.toarray()).astype(np.int64))
    ge = layout.group_exponents(exps).toarray()
    for i in range(n):
        assert np.array_equal(
            ge[i // rows, (i % rows) * d : (i % rows + 1) * d], exps[i].toarray()[0]
        )


def test_shifted_copies_hold_the_matrix_one_row_further_each_and_stay_in_step(test_keys):
    key = test_keys["B"]
    he = Paillier(key.public, key.private)
    packer = Packer(key.public.bits, 62, 40)
    layout = RowLayout(3, 4, 62)
    m = np.arange(-6, 6).reshape(3, 4)
    rows = [[c] for c in he.encrypt([v[0] for v in packer.pack(m)])]
    copies = ShiftedCopies(rows, layout, key.public.nsquare, 2)
    assert copies.copies[0] is rows
    delta = [[c] for c in he.encrypt([v[0] for v in packer.pack(np.ones((1, 4), int))])]
    copies.add([1], delta)
    expected = m.copy()
    expected[1] += 1
    for t, copy in enumerate(copies.copies):
        plain = [he.decrypt(row)[0] for row in copy]
        shifted = [v[0] * 2 ** (t * layout.shift_bits) for v in packer.pack(expected)]
        assert plain == shifted
    assert len(copies.stacked()) == 9


@pytest.mark.parametrize("n", [1, 5, 6, 7])
def test_horner_and_shifted_copies_give_the_same_packed_product(test_keys, n):
    key = test_keys["B"]
    he = Paillier(key.public, key.private)
    packer = Packer(key.public.bits, 62, 40)
    layout, nsq = RowLayout(3, 2, 62), key.public.nsquare
    m = np.arange(-5, 5).reshape(5, 2)
    copies_rows = [[c] for c in he.encrypt([v[0] for v in packer.pack(m)])]
    horner_rows = [list(row) for row in copies_rows]
    copies = ShiftedCopies(copies_rows, layout, nsq, 2)
    horner = HornerRows(horner_rows, layout, nsq, 2)
    delta = [[c] for c in he.encrypt([v[0] for v in packer.pack(np.full((1, 2), 3))])]
    copies.add([4], delta)
    horner.add([4], delta)
    x = sp.csr_matrix(np.random.default_rng(n).integers(-3, 4, size=(n, 5)))
    matmul = CipherMatmul(workers=1)
    from_copies = [he.decrypt(row) for row in copies.product(matmul, x, 1)]
    from_horner = [he.decrypt(row) for row in horner.product(matmul, x, 1)]
    assert from_copies == from_horner and len(from_horner) == layout.groups(n)
    m[4] += 3
    expected = layout.group_values(x.toarray() @ m)
    signed = [[to_signed(v, key.public.n) for v in row] for row in from_horner]
    assert packer.unpack(signed, 6).tolist() == expected.tolist()


def test_an_updated_matrix_over_many_features_uses_horners_rule(test_keys):
    nsq, layout = test_keys["B"].public.nsquare, RowLayout(32, 1, 62)
    assert isinstance(packed_products([], layout, 73, nsq, 1), HornerRows)  # a9a
    assert isinstance(packed_products([], RowLayout(4, 8, 62), 13, nsq, 1), ShiftedCopies)


def test_layer_params_carry_and_check_rows_per_cipher():
    config = config_for_tests()
    params = LayerParams.for_active(config, 4, 5, ["A1"]).with_row_packing(None, 6)
    assert params.rows_per_cipher == 4  # 23 slots of 41 bits in a 1024-bit key
    decoded = LayerParams.from_payload(params.to_payload())
    assert decoded == params and decoded.layout() == RowLayout(4, 5, 41)
    bad = LayerParams.for_active(config, 4, 5, ["A1"]).with_row_packing(None, 6)
    payload = bad.to_payload()
    payload.layer_setup.matmul.rows_per_cipher = 5  # 5 x 5 > 23 slots
    with pytest.raises(PayloadError, match="do not fit the 23 slots"):
        LayerParams.from_payload(payload)


@pytest.mark.parametrize("rows", [1, 2, None])
def test_training_with_and_without_row_packing_matches_plaintext(test_keys, rows):
    config = config_for_tests(rows_per_cipher=rows, obfuscator_pool=8, obfuscator_helpers=0)
    job = make_job(test_keys, h=4, config_a=config, config_b=config)
    assert job.active.params.rows_per_cipher == (rows or 5)  # 23 slots / 4 outputs
    rng = np.random.default_rng(8)
    for step, n in enumerate((7, 9)):  # batches that do not fill the last group
        xs, x_b = batch(rng, job, n, sparse=bool(step))
        target = rng.normal(size=(n, 4))
        z = secure_step(job, f"b{step}", xs, x_b, target)
        expected = plain_step(job.weights, xs, x_b, target)
        assert_close(z, expected, 1e-4)
    close(job)
