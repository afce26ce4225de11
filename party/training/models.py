"""Torch building blocks: bottom MLPs, the top model, optimisers, seeded initialisation."""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence

import torch
from torch import nn


def mlp(in_dim: int, hidden: Sequence[int], out_dim: int) -> nn.Sequential:
    """Linear layers with ReLU between them; the output layer is linear."""
    layers: list[nn.Module] = []
    width = in_dim
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, out_dim))
    return nn.Sequential(*layers)


def seeded_mlp(seed: int, salt: str, in_dim: int, hidden: Sequence[int], out_dim: int):
    """An MLP whose initial weights depend only on (seed, salt), not on global RNG state."""
    gen_seed = (seed * 1_000_003 + zlib.crc32(salt.encode())) % (2**63)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(gen_seed)
        return mlp(in_dim, hidden, out_dim)


def make_optimizer(name: str, params: Iterable[torch.nn.Parameter], lr: float):
    params = list(params)
    if name == "adagrad":
        return torch.optim.Adagrad(params, lr=lr)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr)
    return torch.optim.SGD(params, lr=lr)
