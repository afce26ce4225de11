"""Tests of CELU-VFL instance weighting (docs/protocols.md §6)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import arrays
from vfl.celu.errors import WeightingError
from vfl.celu.weighting import (
    active_local_loss,
    instance_weights,
    passive_local_derivative,
    rowwise_cosine,
    weighted_derivative,
    weighted_mean_loss,
    weighting_enabled,
)

from tests.support.numeric import assert_close

X = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 0.0], [1.0, 1.0], [2.0, 0.0]])
Y = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [0.0, 3.0]])
ROOT_HALF = 1 / math.sqrt(2)


def test_hand_computed_cosines() -> None:
    # Zero rows hit the 1e-12 norm floor and give cosine 0.
    assert_close(rowwise_cosine(X, Y), [1.0, -1.0, 0.0, ROOT_HALF, 0.0])


@pytest.mark.parametrize(
    ("xi", "expected"),
    [
        (0.5, [1.0, 0.0, 0.0, ROOT_HALF, 0.0]),
        (0.8, [1.0, 0.0, 0.0, 0.0, 0.0]),
        (0.0, [1.0, 0.0, 0.0, ROOT_HALF, 0.0]),
        (-0.5, [1.0, 0.0, 0.0, ROOT_HALF, 0.0]),
        (-0.99, [1.0, 0.0, 0.0, ROOT_HALF, 0.0]),  # cos -1 < xi
    ],
)
def test_threshold(xi: float, expected: list[float]) -> None:
    assert_close(instance_weights(X, Y, xi), expected)


@pytest.mark.parametrize("xi", [None, 1.0, -1.0, 2.0, float("nan")])
def test_weighting_off_gives_ones(xi: float | None) -> None:
    assert not weighting_enabled(xi)
    assert_close(instance_weights(X, Y, xi), [1.0] * 5)


def test_cosine_is_clipped_for_parallel_rows() -> None:
    x = torch.full((3, 7), 0.1, dtype=torch.float32)
    cos = rowwise_cosine(x, x * 3)
    assert bool((cos <= 1.0).all()) and bool((cos >= -1.0).all())


def test_several_passive_parties_are_concatenated() -> None:
    a, b = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]])
    assert_close(rowwise_cosine([a, b], [a, -b]), [0.0])
    assert_close(rowwise_cosine([a, b], [a, b]), [1.0])


def test_weighted_mean_is_over_n_not_sum_of_weights() -> None:
    losses = torch.tensor([2.0, 4.0, 6.0, 8.0])
    weights = torch.tensor([1.0, 0.0, 0.5, 0.0])
    assert_close(weighted_mean_loss(losses, weights), torch.tensor(5.0 / 4))
    assert_close(weighted_mean_loss(losses.reshape(4, 1), weights), torch.tensor(5.0 / 4))


def test_weighted_derivative_scales_rows() -> None:
    dev = torch.arange(6.0).reshape(3, 2)
    assert_close(
        weighted_derivative(dev, torch.tensor([1.0, 0.0, 0.5])), [[0, 1], [0, 0], [2, 2.5]]
    )


def test_weight_is_detached() -> None:
    fresh = torch.randn(4, 3, requires_grad=True)
    weights = instance_weights(fresh, torch.randn(4, 3), 0.0)
    assert not weights.requires_grad
    losses = (fresh**2).sum(dim=1)
    weighted_mean_loss(losses, instance_weights(fresh, fresh + 0.1, -0.5)).backward()
    expected = 2 * fresh.detach() * instance_weights(fresh, fresh + 0.1, -0.5)[:, None] / 4
    assert_close(fresh.grad, expected)  # type: ignore[arg-type]


def make_active_case() -> tuple[torch.nn.Linear, torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    top = torch.nn.Linear(3, 1)
    with torch.no_grad():
        top.weight.copy_(torch.randn(1, 3, generator=gen))
    cached_act = torch.randn(6, 3, generator=gen)
    labels = (torch.rand(6, generator=gen) > 0.5).float()
    cached_dev = torch.randn(6, 3, generator=gen) * 0.1
    return top, cached_act, labels, cached_dev


def test_active_local_loss_matches_constant_weights() -> None:
    # Prepare
    top, cached_act, labels, cached_dev = make_active_case()
    act = cached_act.clone().requires_grad_(True)
    bce = torch.nn.functional.binary_cross_entropy_with_logits
    losses = bce(top(act).squeeze(1), labels, reduction="none")
    # Execute
    loss, weights = active_local_loss(losses, act, cached_dev, xi=-0.9)
    loss.backward()
    # Assert: the fresh derivative d(mean loss)/d act, weighted by its cosine with the cache
    act2 = cached_act.clone().requires_grad_(True)
    g = torch.autograd.grad(bce(top(act2).squeeze(1), labels), act2)[0]
    expected_w = instance_weights(g, cached_dev, -0.9)
    assert_close(weights, expected_w)
    grad_active = top.weight.grad.clone()  # type: ignore[union-attr]
    top.zero_grad()
    reference = (bce(top(cached_act).squeeze(1), labels, reduction="none") * expected_w).mean()
    reference.backward()
    assert_close(grad_active, top.weight.grad)  # type: ignore[arg-type]


def test_active_local_loss_without_weighting_is_plain_mean() -> None:
    top, cached_act, labels, cached_dev = make_active_case()
    act = cached_act.clone().requires_grad_(True)
    losses = torch.nn.functional.binary_cross_entropy_with_logits(
        top(act).squeeze(1), labels, reduction="none"
    )
    loss, weights = active_local_loss(losses, act, cached_dev, xi=None)
    assert_close(loss, losses.mean())
    assert_close(weights, torch.ones(6))


def test_active_local_loss_needs_graph() -> None:
    top, cached_act, labels, cached_dev = make_active_case()
    losses = torch.ones(6, requires_grad=True)
    with pytest.raises(WeightingError, match="requires_grad"):
        active_local_loss(losses, cached_act, cached_dev, 0.5)
    with pytest.raises(WeightingError, match="not used"):
        active_local_loss(losses * 2, cached_act.clone().requires_grad_(True), cached_dev, 0.5)


def test_passive_local_derivative() -> None:
    bottom = torch.nn.Linear(4, 2)
    x = torch.randn(5, 4)
    fresh = bottom(x)
    cached_act = fresh.detach() + 0.01 * torch.randn(5, 2)
    cached_act[0] = -fresh[0].detach()  # one instance drifted away: weight 0
    cached_dev = torch.randn(5, 2)
    grad, weights = passive_local_derivative(fresh, cached_act, cached_dev, xi=0.5)
    assert weights[0] == 0.0 and bool((weights[1:] > 0.9).all())
    assert_close(grad, cached_dev * weights[:, None])
    fresh.backward(grad)
    assert bottom.weight.grad is not None


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: rowwise_cosine(torch.ones(3, 2), torch.ones(3, 3)), "equal shapes"),
        (lambda: rowwise_cosine(torch.tensor(1.0), torch.tensor(1.0)), "scalar"),
        (lambda: rowwise_cosine([], []), "at least one"),
        (lambda: weighted_mean_loss(torch.ones(3, 2), torch.ones(3)), "per-instance"),
        (lambda: weighted_mean_loss(torch.ones(3), torch.ones(4)), "do not match"),
        (lambda: weighted_derivative(torch.ones(3, 2), torch.ones(2)), "do not match"),
        (
            lambda: passive_local_derivative(
                torch.ones(3, 2), torch.ones(3, 2), torch.ones(3, 4), 0.5
            ),
            "same shape",
        ),
    ],
)
def test_shape_errors(call: object, match: str) -> None:
    with pytest.raises(WeightingError, match=match):
        call()  # type: ignore[operator]


_ROWS = arrays(
    "float64",
    (6, 3),
    elements=st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
)


@settings(max_examples=100, deadline=None)
@given(x=_ROWS, y=_ROWS, xi=st.floats(-0.99, 0.99))
def test_weights_are_zero_or_at_least_xi(x, y, xi: float) -> None:  # type: ignore[no-untyped-def]
    cos = rowwise_cosine(torch.from_numpy(x), torch.from_numpy(y))
    assert bool((cos >= -1).all()) and bool((cos <= 1).all())
    weights = instance_weights(torch.from_numpy(x), torch.from_numpy(y), xi)
    assert bool(((weights == 0) | ((weights >= xi) & (weights == cos))).all())
