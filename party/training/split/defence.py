"""The optional defence of `protocol: split` (the job's `defence:`), at the active party:
a trade-off between accuracy and what the derivatives tell the passive parties about the
labels, not security (docs/security.md, "A defence for split").

- `label_epsilon`: randomised response, epsilon-label-DP. Each training row's binary label
  is flipped once, before training, with probability 1 / (1 + e^epsilon), and the model
  trains on those labels throughout; validation scores against the true labels.
- `gradient_noise`: each derivative sent to a passive party gets Gaussian noise whose
  standard deviation is `gradient_noise` times the batch's root mean square derivative.

Both draw from generators seeded by the job seed only at the active party; no passive
party learns which labels were flipped or which noise was added.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from vfl.contract.spec import DefenceSpec


def flip_probability(epsilon: float) -> float:
    """Randomised response's flip probability at `epsilon`."""
    return 1.0 / (1.0 + math.exp(epsilon))


def randomised_labels(
    labels: torch.Tensor, rows: np.ndarray, epsilon: float, seed: int
) -> torch.Tensor:
    """A copy of binary (0/1 float) `labels` with each of `rows` flipped with probability
    `flip_probability(epsilon)`."""
    rng = np.random.default_rng([seed, 28, 1])
    flip = rows[rng.random(len(rows)) < flip_probability(epsilon)]
    out = labels.clone()
    out[torch.as_tensor(flip, dtype=torch.int64)] = (
        1 - out[torch.as_tensor(flip, dtype=torch.int64)]
    )
    return out


class GradientNoise:
    """Noise for the derivatives a split active party sends (None spec: none)."""

    def __init__(self, defence: DefenceSpec | None, seed: int) -> None:
        self.sigma = None if defence is None else defence.gradient_noise
        self._gen = torch.Generator().manual_seed(seed * 1_000_003 + 28)

    def __call__(self, grad: torch.Tensor) -> torch.Tensor:
        if self.sigma is None:
            return grad
        rms = float(grad.pow(2).mean().sqrt())
        noise = torch.randn(grad.shape, generator=self._gen, dtype=grad.dtype)
        return grad + noise * (self.sigma * rms)
