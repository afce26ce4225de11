"""BFV primitives: parameters at 128-bit security, exact plaintext products through noise
flooding, and the coefficient layouts of the MatMul layer's products."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tenseal")

from vfl.secure.errors import ConfigError  # noqa: E402
from vfl.secure.lattice.bfv import (  # noqa: E402
    BfvContext,
    KeyPair,
    PeerKey,
    centered,
    to_residues,
)
from vfl.secure.lattice.layout import BlockLayout, choose_layout  # noqa: E402
from vfl.secure.lattice.params import BfvParams  # noqa: E402


def negacyclic(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a b in Z[x]/(x^N + 1), exact (Python integers)."""
    n = a.size
    full = np.convolve(a.astype(object), b.astype(object))
    out = full[:n].copy()
    out[: full.size - n] -= full[n:]
    return out


@pytest.fixture(scope="module")
def ctx() -> BfvContext:
    return BfvContext(BfvParams())


@pytest.mark.parametrize(
    ("params", "field"),
    [
        (BfvParams(coeff_bits=(60, 60, 60, 60)), "coeff_bits"),
        (BfvParams(poly_degree=4096), "coeff_bits"),
        (BfvParams(stat_bits=30), "stat_bits"),
        (BfvParams(poly_degree=1000), "poly_degree"),
    ],
)
def test_parameters_below_128_bit_security_are_refused_naming_the_field(params, field) -> None:
    with pytest.raises(ConfigError, match=f"crypto.bfv.{field}"):
        params.validate()


def test_a_flooded_product_decrypts_to_the_exact_product(ctx: BfvContext) -> None:
    # Prepare
    own, rng = KeyPair(ctx), np.random.default_rng(0)
    peer = PeerKey(ctx, own.public_bytes)
    m = rng.integers(-1000, 1000, ctx.degree)
    x = np.zeros(ctx.degree, dtype=np.int64)
    x[:300] = rng.integers(-(2**11), 2**11, 300)
    # Execute: encrypt (seeded bytes), multiply, flood at 90 bits, decrypt at the last level
    ct = ctx.ciphertext(own.encrypt(to_residues(m, 41)))
    wire = ctx.flood(ctx.dot([ct], [ctx.plaintext(to_residues(x, 41))]), peer, 90)
    got = centered(own.decrypt(ctx.ciphertext(wire, last=True)), 41)
    # Assert
    t = 1 << 41
    expected = np.array([((int(v) + t // 2) % t) - t // 2 for v in negacyclic(x, m)])
    assert np.array_equal(got, expected)
    assert len(wire) < 140_000  # one 60-bit prime, two polynomials


def test_a_flooded_ciphertext_does_not_carry_the_product_s_second_polynomial(ctx) -> None:
    own = KeyPair(ctx)
    peer = PeerKey(ctx, own.public_bytes)
    ct = ctx.ciphertext(own.encrypt(ctx.random_coeffs(1)[0]))
    a = ctx.flood(ctx.dot([ct], [ctx.plaintext(ctx.random_coeffs(1)[0])]), peer, 80)
    b = ctx.flood(ctx.dot([ct], [ctx.plaintext(ctx.random_coeffs(1)[0])]), peer, 80)
    assert a != b and abs(len(a) - len(b)) < 2_000


@pytest.mark.parametrize(
    ("degree", "d", "h", "n", "width"),
    [(64, 5, 3, 10, 2), (64, 7, 1, 20, 7), (128, 6, 4, 9, 3), (64, 3, 2, 5, 1)],
)
def test_layouts_give_x_w_forward_and_x_t_g_on_the_weight_support(degree, d, h, n, width):
    lay, rng = BlockLayout(degree, d, h, width), np.random.default_rng(1)
    x, w, g = (rng.integers(-5, 5, s) for s in ((n, d), (d, h), (n, h)))
    w_polys = lay.weights(w)
    assert np.array_equal(lay.read_weights(w_polys), w)
    xf = lay.forward_plain(x)
    z = [sum(negacyclic(xf[i, b], w_polys[b]) for b in range(lay.blocks)) for i in range(len(xf))]
    assert np.array_equal(lay.read_output(np.array(z), n), x @ w)
    gp, xb = lay.grad_polys(g), lay.backward_plain(x)
    dw = [sum(negacyclic(xb[r, b], gp[r]) for r in range(len(gp))) for b in range(lay.blocks)]
    assert np.array_equal(lay.read_weights(np.array(dw)), x.T @ g)


def test_the_layout_is_chosen_by_its_cost() -> None:
    lay = choose_layout(8192, 13, 8, 256, refreshed=True)
    assert lay.groups(256) * lay.blocks <= 4 and lay.rows_forward * lay.support <= 8192
