"""Plaintext x ciphertext matrix products against exact integer numpy products."""

from __future__ import annotations

import random

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp
from vfl.secure.paillier.cipher_matmul import CipherMatmul, feature_exponents
from vfl.secure.paillier.engine import Paillier
from vfl.secure.paillier.multiexp import multiexp_columns
from vfl.secure.paillier.obfuscators import ObfuscatorPool


@pytest.fixture(scope="module")
def he(test_keys):
    key = test_keys["B"]
    return Paillier(key.public, key.private, ObfuscatorPool(key.public, key.private, 0, 2, False))


def encrypt_rows(he, values: list[list[int]]):
    flat = he.encrypt([v for row in values for v in row])
    cols = len(values[0])
    return [flat[i : i + cols] for i in range(0, len(flat), cols)]


def decrypt_rows(he, rows):
    return np.array([he.decrypt(row) for row in rows], dtype=object)


def exact_product(exps, values) -> np.ndarray:
    dense = exps.toarray() if sp.issparse(exps) else np.asarray(exps)
    return dense.astype(object).dot(np.array(values, dtype=object))


@settings(max_examples=15, deadline=None)
@given(
    hnp.arrays(
        np.int64,
        st.tuples(st.integers(1, 6), st.integers(1, 7)),
        elements=st.integers(-(2**20), 2**20),
    ),
    st.integers(1, 2),
)
def test_matmul_equals_the_integer_product(he, exps, cols):
    values = [
        [random.randrange(-(2**60), 2**60) for _ in range(cols)] for _ in range(exps.shape[1])
    ]
    out = CipherMatmul(workers=1).matmul(exps, encrypt_rows(he, values), he.pk.nsquare, cols)
    np.testing.assert_array_equal(decrypt_rows(he, out), exact_product(exps, values))


def test_sparse_features_cost_only_their_nonzeros_and_absent_rows_are_zero(he):
    rng = np.random.default_rng(1)
    x = sp.random(
        12,
        30,
        density=0.1,
        format="csr",
        random_state=2,
        data_rvs=lambda size: rng.normal(size=size),
    )
    exps = feature_exponents(x, 16)
    assert exps.nnz == x.nnz
    values = [[random.randrange(-(2**50), 2**50)] for _ in range(30)]
    out = CipherMatmul(workers=1).matmul(exps, encrypt_rows(he, values), he.pk.nsquare, 1)
    np.testing.assert_array_equal(decrypt_rows(he, out), exact_product(exps, values))
    empty = np.flatnonzero(np.diff(exps.indptr) == 0)
    assert all(out[i][0] == 1 for i in empty)  # trivial encryption of 0, no work


def test_binary_features_are_ciphertext_additions(he):
    x = np.array([[1, 0, 1], [0, 0, 0], [1, 1, 1]], dtype=float)
    exps = feature_exponents(x, 0)
    bases = encrypt_rows(he, [[5], [-7], [11]])
    out = CipherMatmul(workers=1).matmul(exps, bases, he.pk.nsquare, 1)
    nsq = he.pk.nsquare
    assert out[0][0] == bases[0][0] * bases[2][0] % nsq  # plain products, no powmod
    assert he.decrypt([r[0] for r in out]) == [16, 0, 9]


@settings(max_examples=10, deadline=None)
@given(st.integers(1, 8), st.integers(1, 9), st.integers(1, 2), st.integers(0, 10**6))
def test_unit_exponents_match_the_general_kernel(he, n, d, cols, seed):
    rng = np.random.default_rng(seed)
    exps = sp.csr_matrix(rng.choice([-1, 0, 0, 1], size=(n, d)).astype(np.int64))
    values = [[int(v) for v in rng.integers(-(2**40), 2**40, size=cols)] for _ in range(d)]
    out = CipherMatmul(workers=1).matmul(exps, encrypt_rows(he, values), he.pk.nsquare, cols)
    np.testing.assert_array_equal(decrypt_rows(he, out), exact_product(exps, values))


def test_negative_exponents_use_one_inverse_not_huge_exponents(he):
    bases = encrypt_rows(he, [[3], [4]])
    pos, neg = multiexp_columns(
        he.pk.nsquare,
        [b[0] for b in bases],
        np.array([0, 1, 2]),
        np.array([0, 0]),
        np.array([5, -2]),
        1,
    )
    assert he.decrypt([pos[0], neg[0]]) == [15, 8]


def test_transposed_product_matches(he):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(9, 5))
    exps = feature_exponents(x, 16)
    grads = [[random.randrange(-(2**30), 2**30) for _ in range(2)] for _ in range(9)]
    out = CipherMatmul(workers=1).matmul(-exps.T.tocsr(), encrypt_rows(he, grads), he.pk.nsquare, 2)
    np.testing.assert_array_equal(decrypt_rows(he, out), exact_product(-exps.T, grads))


def test_process_pool_gives_the_same_result(he):
    rng = np.random.default_rng(4)
    exps = feature_exponents(rng.normal(size=(20, 16)), 12)
    values = [[random.randrange(-(2**40), 2**40) for _ in range(2)] for _ in range(16)]
    bases = encrypt_rows(he, values)
    engine = CipherMatmul(workers=2, parallel_min_terms=1)
    try:
        min_terms = engine._min_terms(he.pk.nsquare)  # an owned pool: 1 // 2 -> 1
        assert len(engine._blocks(sp.csc_matrix(exps), min_terms)) == 2
        out = engine.matmul(exps, bases, he.pk.nsquare, 2)
    finally:
        engine.close()
    np.testing.assert_array_equal(decrypt_rows(he, out), exact_product(exps, values))


def test_shape_mismatch_is_an_error(he):
    with pytest.raises(ValueError, match="cannot multiply a 2x3 matrix by 2 rows"):
        CipherMatmul(workers=1).matmul(
            np.ones((2, 3), dtype=np.int64), [[1], [1]], he.pk.nsquare, 1
        )


def test_feature_exponents_reject_nan():
    with pytest.raises(ValueError, match="NaN"):
        feature_exponents(np.array([[1.0, np.nan]]), 16)
