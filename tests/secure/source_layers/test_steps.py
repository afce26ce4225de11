"""The step sizes of the MatMul source layer (`secure.source_layers.steps`): B's own share
follows torch's optimisers, the column step sizes and the feature factors their formulas."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from vfl.secure.errors import ConfigError, StateError
from vfl.secure.source_layers.steps import SourceOptimizer, feature_step_factors, scaled_columns


@pytest.mark.parametrize("rule", ["sgd", "adagrad", "adam"])
def test_own_steps_follow_torch(rule):
    # Prepare: the same parameter and gradients for torch and for SourceOptimizer
    rng = np.random.default_rng(1)
    start = rng.normal(size=(4, 3))
    grads = [rng.normal(size=(4, 3)) for _ in range(5)]
    param = torch.nn.Parameter(torch.tensor(start))
    torch_opt = {"sgd": torch.optim.SGD, "adagrad": torch.optim.Adagrad, "adam": torch.optim.Adam}
    opt_t = torch_opt[rule]([param], lr=0.05)
    opt = SourceOptimizer(rule)
    ours = start.copy()
    # Execute
    for g in grads:
        param.grad = torch.tensor(g)
        opt_t.step()
        ours = opt.own_step("v_b", ours, g, 0.05)
    # Assert
    np.testing.assert_allclose(ours, param.detach().numpy(), rtol=1e-9, atol=1e-12)


def test_column_steps_divide_by_the_root_of_the_accumulated_squares():
    rng = np.random.default_rng(2)
    g1, g2 = rng.normal(size=(8, 3)), rng.normal(size=(8, 3))
    opt = SourceOptimizer("adagrad")
    first, second = opt.passive_step(g1, 0.1), opt.passive_step(g2, 0.1)
    np.testing.assert_allclose(first, 0.1 * g1 / np.sqrt((g1**2).sum(0)))
    np.testing.assert_allclose(second, 0.1 * g2 / np.sqrt((g1**2 + g2**2).sum(0)))
    np.testing.assert_array_equal(SourceOptimizer("sgd").passive_step(g1, 0.1), 0.1 * g1)


def test_optimiser_state_round_trips_and_names_its_rule():
    rng = np.random.default_rng(3)
    opt, twin = SourceOptimizer("adam"), SourceOptimizer("adam")
    opt.passive_step(rng.normal(size=(4, 2)), 0.1)
    opt.own_step("bias", np.zeros(2), rng.normal(size=2), 0.1)
    twin.load_state_dict(opt.state_dict())
    g = rng.normal(size=(4, 2))
    np.testing.assert_array_equal(twin.passive_step(g, 0.1), opt.passive_step(g, 0.1))
    with pytest.raises(StateError, match="'adam'"):
        SourceOptimizer("adagrad").load_state_dict(opt.state_dict())
    with pytest.raises(ConfigError, match="one of"):
        SourceOptimizer("lbfgs")


def test_feature_factors_are_the_inverse_rms_of_each_column():
    x = np.array([[1.0, 0.0, 0.0, 2.0], [1.0, 0.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0]] * 3)
    expected = np.array([1.0, 1.0, np.sqrt(3.0), np.sqrt(3.0) / 2])
    np.testing.assert_allclose(feature_step_factors(x), expected)
    np.testing.assert_allclose(feature_step_factors(sp.csr_matrix(x)), expected)


def test_scaled_columns_round_factors_for_integer_features():
    x = sp.csr_matrix(np.array([[1.0, 1.0, 1.0]]))
    factors = np.array([0.3, 2.4, 5.77])
    assert scaled_columns(x, factors, 0).toarray().tolist() == [[1.0, 2.0, 6.0]]
    np.testing.assert_allclose(scaled_columns(x.toarray(), factors, 16), [factors])
    assert scaled_columns(x, None, 16) is x
