"""Torch building blocks: bottom MLPs, the top model, optimisers, seeded initialisation."""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Sequence

import numpy as np
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


def _generator(seed: int, salt: str) -> torch.Generator:
    """A private generator: parties that run as threads of one process never share the
    global torch RNG, so initial weights depend only on (seed, salt)."""
    return torch.Generator().manual_seed((seed * 1_000_003 + zlib.crc32(salt.encode())) % 2**63)


def _reinit(module: nn.Module, gen: torch.Generator) -> nn.Module:
    """Torch's default initialisation, drawn from `gen`."""
    with torch.no_grad():
        for layer in module.modules():
            if isinstance(layer, nn.Linear):
                nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=gen)
                bound = 1 / math.sqrt(layer.in_features) if layer.in_features else 0.0
                nn.init.uniform_(layer.bias, -bound, bound, generator=gen)
            elif isinstance(layer, nn.Embedding):
                nn.init.normal_(layer.weight, std=0.01, generator=gen)
    return module


def seeded_mlp(seed: int, salt: str, in_dim: int, hidden: Sequence[int], out_dim: int):
    """An MLP whose initial weights depend only on (seed, salt)."""
    return _reinit(mlp(in_dim, hidden, out_dim), _generator(seed, salt))


def make_optimizer(name: str, params: Iterable[torch.nn.Parameter], lr: float):
    params = list(params)
    if name == "adagrad":
        return torch.optim.Adagrad(params, lr=lr)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr)
    return torch.optim.SGD(params, lr=lr)


class Inputs:
    """A party's aligned inputs: dense float features and optional categorical codes."""

    def __init__(
        self, dense: np.ndarray, categorical: np.ndarray | None, cardinalities: Sequence[int] = ()
    ) -> None:
        self.dense = torch.as_tensor(dense, dtype=torch.float32)
        self.cat = None if categorical is None else torch.as_tensor(categorical, dtype=torch.int64)
        self.cardinalities = tuple(cardinalities)

    @property
    def empty(self) -> bool:
        return self.dense.shape[1] == 0 and self.cat is None

    def subset(self, rows: np.ndarray) -> Inputs:
        """These inputs' `rows`, in that order."""
        dense, cat = self.take(rows)
        return Inputs(dense.numpy(), None if cat is None else cat.numpy(), self.cardinalities)

    def take(self, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor | None]:
        idx = torch.as_tensor(rows, dtype=torch.int64)
        return self.dense[idx], None if self.cat is None else self.cat[idx]


class Bottom(nn.Module):
    """Embeddings of categorical fields (if any) concatenated with dense features, then an
    MLP. With no categorical fields and no hidden layers it is a linear layer."""

    def __init__(
        self,
        dense_dim: int,
        cardinalities: Sequence[int],
        emb_dim: int,
        hidden: Sequence[int],
        out_dim: int,
    ) -> None:
        super().__init__()
        self.embeddings = nn.ModuleList(nn.Embedding(c, emb_dim) for c in cardinalities)
        self.mlp = mlp(dense_dim + emb_dim * len(cardinalities), hidden, out_dim)

    def forward(self, inputs: tuple[torch.Tensor, torch.Tensor | None]) -> torch.Tensor:
        dense, cat = inputs
        parts = [dense]
        if cat is not None:
            parts += [emb(cat[:, i]) for i, emb in enumerate(self.embeddings)]
        return self.mlp(torch.cat(parts, dim=1))


def seeded_bottom(
    seed: int, salt: str, inputs: Inputs, emb_dim: int, hidden: Sequence[int], out_dim: int
) -> Bottom:
    bottom = Bottom(inputs.dense.shape[1], inputs.cardinalities, emb_dim, hidden, out_dim)
    return _reinit(bottom, _generator(seed, salt))
