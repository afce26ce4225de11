"""Instance weighting of CELU-VFL local updates (docs/protocols.md §6).

A local update reuses stale statistics; instances whose statistics moved a lot since they
were cached are down-weighted or dropped. Per instance i,

    cos_i = <x_i, y_i> / (max(|x_i|, 1e-12) * max(|y_i|, 1e-12)), clipped to [-1, 1]
    w_i   = cos_i if cos_i >= xi else 0

and weighting is on only for ``-1 < xi < 1``; otherwise every ``w_i = 1`` (the ablation).
The weight is a constant: it is computed on detached tensors, so no gradient flows through
it (the authors' TF code omits the stop-gradient on the active side; detaching is the
evident intent). Weighted quantities are still averaged over N, never renormalised by
``sum(w)``.

- Active party: ``x`` = the fresh derivative of the mean loss w.r.t. the cached passive
  activation (current top model), ``y`` = the cached derivative; minimise
  ``mean_i(w_i * loss_i)`` (`active_local_loss`).
- Passive party: ``x`` = its freshly recomputed activation, ``y`` = the cached one;
  back-propagate ``w * cached_derivative`` (`passive_local_derivative`).
- Passive party in ``blindfl`` mode: it only holds an encrypted derivative, so its weight
  is 1 and none of this applies.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from vfl.celu.errors import WeightingError

NORM_FLOOR = 1e-12


def _threshold(xi: float | None) -> float | None:
    """``xi`` as a float when it turns weighting on, else None."""
    if xi is None or not -1.0 < float(xi) < 1.0:
        return None
    return float(xi)


def weighting_enabled(xi: float | None) -> bool:
    """Whether threshold ``xi`` turns weighting on (``-1 < xi < 1``)."""
    return _threshold(xi) is not None


def _as_rows(tensors: torch.Tensor | Sequence[torch.Tensor], what: str) -> torch.Tensor:
    """Detach, flatten each to (N, -1) and concatenate along features."""
    parts = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors)
    if not parts:
        raise WeightingError(f"{what}: expected at least one tensor")
    if any(p.dim() == 0 for p in parts):
        raise WeightingError(f"{what}: tensors need a batch dimension, got a scalar")
    n = parts[0].shape[0]
    if any(p.shape[0] != n for p in parts):
        raise WeightingError(f"{what}: batch sizes differ: {[p.shape[0] for p in parts]}")
    return torch.cat([p.detach().reshape(n, -1) for p in parts], dim=1)


def rowwise_cosine(
    x: torch.Tensor | Sequence[torch.Tensor], y: torch.Tensor | Sequence[torch.Tensor]
) -> torch.Tensor:
    """Per-instance cosine similarity of two (N x h) tensors, detached, in [-1, 1].

    A sequence of tensors (one per passive party) is concatenated along features first.

    Raises:
        WeightingError: if the shapes do not match.
    """
    xs, ys = _as_rows(x, "x"), _as_rows(y, "y")
    if xs.shape != ys.shape:
        raise WeightingError(
            f"cosine needs equal shapes, got {tuple(xs.shape)} vs {tuple(ys.shape)}"
        )
    ys = ys.to(xs.dtype)
    dots = (xs * ys).sum(dim=1)
    norms = xs.norm(dim=1).clamp_min(NORM_FLOOR) * ys.norm(dim=1).clamp_min(NORM_FLOOR)
    cos: torch.Tensor = (dots / norms).clamp(-1.0, 1.0)
    return cos


def instance_weights(
    fresh: torch.Tensor | Sequence[torch.Tensor],
    cached: torch.Tensor | Sequence[torch.Tensor],
    xi: float | None,
) -> torch.Tensor:
    """The detached weight vector ``w`` (length N) for threshold ``xi``.

    Returns all ones (in ``fresh``'s dtype) when weighting is off.
    """
    threshold = _threshold(xi)
    if threshold is None:
        rows = _as_rows(fresh, "fresh")
        return torch.ones(rows.shape[0], dtype=rows.dtype, device=rows.device)
    cos = rowwise_cosine(fresh, cached)
    return torch.where(cos >= threshold, cos, torch.zeros_like(cos))


def weighted_mean_loss(losses: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``mean_i(w_i * loss_i)`` over all N instances (not renormalised by ``sum(w)``).

    Raises:
        WeightingError: if ``losses`` is not N or (N x 1), or ``weights`` is not length N.
    """
    flat = _per_instance(losses)
    if weights.shape != flat.shape:
        raise WeightingError(
            f"weights {tuple(weights.shape)} do not match losses {tuple(flat.shape)}"
        )
    return (flat * weights.detach().to(flat.dtype)).mean()


def weighted_derivative(cached_derivative: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``w ⊙ d̃``: scale each row of the cached derivative (N x ...) by its weight."""
    if cached_derivative.dim() == 0 or weights.shape != (cached_derivative.shape[0],):
        raise WeightingError(
            f"weights {tuple(weights.shape)} do not match derivative rows "
            f"{tuple(cached_derivative.shape)}"
        )
    shape = (-1,) + (1,) * (cached_derivative.dim() - 1)
    w = weights.detach().to(cached_derivative.dtype).reshape(shape)
    return cached_derivative.detach() * w


def active_local_loss(
    losses: torch.Tensor,
    cached_activations: torch.Tensor | Sequence[torch.Tensor],
    cached_derivatives: torch.Tensor | Sequence[torch.Tensor],
    xi: float | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The active party's weighted local loss on a cached batch.

    Args:
        losses: per-instance losses (N or N x 1) from the current top model run on the
            cached passive activations.
        cached_activations: those activations, as tensors with ``requires_grad=True`` that
            the top model consumed (one per passive party).
        cached_derivatives: the derivatives sent for them in the communication round.
        xi: the similarity threshold.

    Returns:
        ``(mean_i(w_i * loss_i), w)``; back-propagate the first to update the top model and
        the active party's own bottom model.

    Raises:
        WeightingError: on shape mismatches, or if an activation is not part of the loss graph.
    """
    flat = _per_instance(losses)
    if not weighting_enabled(xi):
        weights = torch.ones_like(flat.detach())
        return weighted_mean_loss(flat, weights), weights
    acts = (
        [cached_activations]
        if isinstance(cached_activations, torch.Tensor)
        else list(cached_activations)
    )
    if not all(a.requires_grad for a in acts):
        raise WeightingError("cached activations need requires_grad=True before the top model")
    grads = torch.autograd.grad(flat.mean(), acts, retain_graph=True, allow_unused=True)
    fresh = [g for g in grads if g is not None]
    if len(fresh) != len(acts):
        raise WeightingError(
            "a cached activation is not used by the loss; feed it to the top model"
        )
    weights = instance_weights(fresh, cached_derivatives, xi)
    return weighted_mean_loss(flat, weights), weights


def passive_local_derivative(
    fresh_activation: torch.Tensor,
    cached_activation: torch.Tensor,
    cached_derivative: torch.Tensor,
    xi: float | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The passive party's weighted stale derivative ``w ⊙ d̃`` for a cached batch.

    Returns:
        ``(w ⊙ d̃, w)``; call ``fresh_activation.backward(w ⊙ d̃)`` and step the optimiser.
    """
    if tuple(fresh_activation.shape) != tuple(cached_derivative.shape):
        raise WeightingError(
            f"fresh activation {tuple(fresh_activation.shape)} and cached derivative "
            f"{tuple(cached_derivative.shape)} must have the same shape"
        )
    weights = instance_weights(fresh_activation, cached_activation, xi)
    return weighted_derivative(cached_derivative, weights), weights


def _per_instance(losses: torch.Tensor) -> torch.Tensor:
    if losses.dim() == 2 and losses.shape[1] == 1:
        return losses.reshape(-1)
    if losses.dim() != 1:
        raise WeightingError(
            f"expected per-instance losses of shape (N,), got {tuple(losses.shape)}"
        )
    return losses
