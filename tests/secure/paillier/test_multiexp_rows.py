"""The row-wise (Straus) multi-exponentiation kernel against direct powers and the comb."""

from __future__ import annotations

import random

import gmpy2
import numpy as np
import pytest
import scipy.sparse as sp
from gmpy2 import mpz
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp
from vfl.secure.paillier import multiexp
from vfl.secure.paillier.multiexp_rows import WINDOWS, estimated_cost, multiexp_rows

MODULUS = mpz(2**127 - 1) * mpz(2**89 - 1)  # any modulus: the kernels are group-agnostic


def direct(bases, dense: np.ndarray) -> tuple[list, list]:
    pos, neg = [], []
    for row in dense:
        p = n = None
        for base, e in zip(bases, row.tolist(), strict=True):
            if e:
                term = gmpy2.powmod(base, abs(e), MODULUS)
                if e > 0:
                    p = term if p is None else p * term % MODULUS
                else:
                    n = term if n is None else n * term % MODULUS
        pos.append(p)
        neg.append(n)
    return pos, neg


def block(dense: np.ndarray):
    csc = sp.csc_matrix(dense)
    csc.eliminate_zeros()
    return csc.indptr, csc.indices, csc.data.astype(np.int64)


@settings(max_examples=40, deadline=None)
@given(
    hnp.arrays(
        np.int64,
        st.tuples(st.integers(1, 6), st.integers(1, 9)),
        elements=st.integers(-(2**20), 2**20) | st.sampled_from([0, 0, 1, -1]),
    ),
    st.sampled_from(WINDOWS),
)
def test_straus_equals_direct_powers(dense, window):
    bases = [mpz(random.randrange(2, int(MODULUS))) for _ in range(dense.shape[1])]
    indptr, rows, data = block(dense)
    assert multiexp_rows(MODULUS, bases, indptr, rows, data, len(dense), window) == direct(
        bases, dense
    )


def test_the_dispatch_picks_the_cheaper_kernel_and_both_agree(monkeypatch):
    rng = np.random.default_rng(3)
    few_outputs = rng.integers(-(2**18), 2**18, size=(4, 64))  # X^T [[G]]-like
    many_outputs = rng.integers(-(2**18), 2**18, size=(96, 3))  # few bases, many uses
    for dense, straus_wins in ((few_outputs, True), (many_outputs, False)):
        bases = [mpz(random.randrange(2, int(MODULUS))) for _ in range(dense.shape[1])]
        indptr, rows, data = block(dense)
        cost, _ = estimated_cost(indptr, rows, data)
        assert (cost < multiexp._comb_cost(indptr, data)) is straus_wins
        chosen = multiexp.multiexp_columns(MODULUS, bases, indptr, rows, data, len(dense))
        monkeypatch.setattr(multiexp, "estimated_cost", lambda *a: (float("inf"), 4))
        comb = multiexp.multiexp_columns(MODULUS, bases, indptr, rows, data, len(dense))
        monkeypatch.undo()
        assert chosen == comb == direct(bases, dense)


@pytest.mark.parametrize("window", WINDOWS)
def test_outputs_without_terms_stay_empty(window):
    dense = np.array([[0, 0], [3, -1], [0, 0]])
    bases = [mpz(5), mpz(7)]
    pos, neg = multiexp_rows(MODULUS, bases, *block(dense), 3, window)
    assert pos == [None, mpz(125), None] and neg == [None, mpz(7), None]
