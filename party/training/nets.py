"""Torch networks: bottom MLPs, the top model, optimisers, seeded initialisation (the
network kind's building blocks; a party's inputs are `training.inputs`)."""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Sequence
from typing import TypeVar

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn
from vfl.party.training.inputs import Inputs, Rows


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


def _reinit(module: M, gen: torch.Generator) -> M:
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


def set_output_bias(net: nn.Sequential, bias: np.ndarray) -> None:
    """Set the bias of `net`'s output layer (the last linear layer of `mlp()`)."""
    last = net[-1]
    if not isinstance(last, nn.Linear):
        raise TypeError(f"an MLP ends with a linear layer, not {type(last).__name__}")
    with torch.no_grad():
        last.bias.copy_(torch.as_tensor(bias, dtype=last.bias.dtype))


def make_optimizer(name: str, params: Iterable[torch.nn.Parameter], lr: float):
    params = list(params)
    if name == "adagrad":
        return torch.optim.Adagrad(params, lr=lr)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr)
    return torch.optim.SGD(params, lr=lr)


M = TypeVar("M", bound=nn.Module)


def _sparse_product(x: sp.csr_matrix, weight: torch.Tensor) -> torch.Tensor:
    """x @ weight.T for CSR x (rows x d) and weight (out x d): one embedding-bag sum over
    x's nonzeros, O(nnz x out) forward and backward; the gradient reaches `weight`."""
    rows = x.shape[0]
    if x.nnz == 0:
        return weight.new_zeros((rows, weight.shape[0]))
    return nn.functional.embedding_bag(
        torch.from_numpy(x.indices.astype(np.int64)),
        weight.t(),
        torch.from_numpy(x.indptr[:-1].astype(np.int64)),
        mode="sum",
        per_sample_weights=torch.from_numpy(np.asarray(x.data, dtype=np.float32)),
    )


def mlp_forward(net: nn.Sequential, x: Rows) -> torch.Tensor:
    """`net(x)` for an MLP of `mlp()` whose input may be a CSR matrix."""
    if not sp.issparse(x):
        return net(x)
    first = _first_linear(net)
    return net[1:](_sparse_product(x, first.weight) + first.bias)


def _first_linear(net: nn.Sequential) -> nn.Linear:
    first = net[0]
    if not isinstance(first, nn.Linear):
        raise TypeError(f"an MLP starts with a linear layer, not {type(first).__name__}")
    return first


class Bottom(nn.Module):
    """Embeddings of categorical fields (if any) concatenated with dense features, then an
    MLP. With no categorical fields and no hidden layers it is a linear layer. Sparse (CSR)
    features enter the first layer as a sparse product, never as a dense matrix."""

    def __init__(
        self,
        dense_dim: int,
        cardinalities: Sequence[int],
        emb_dim: int,
        hidden: Sequence[int],
        out_dim: int,
    ) -> None:
        super().__init__()
        self.dense_dim = dense_dim
        self.embeddings = nn.ModuleList(nn.Embedding(c, emb_dim) for c in cardinalities)
        self.mlp = mlp(dense_dim + emb_dim * len(cardinalities), hidden, out_dim)

    def forward(self, inputs: tuple[Rows, torch.Tensor | None]) -> torch.Tensor:
        dense, cat = inputs
        embedded = [] if cat is None else [emb(cat[:, i]) for i, emb in enumerate(self.embeddings)]
        if not sp.issparse(dense):
            return self.mlp(torch.cat([dense, *embedded], dim=1))
        first, d = _first_linear(self.mlp), self.dense_dim
        h = _sparse_product(dense, first.weight[:, :d]) + first.bias
        if embedded:
            h = h + torch.cat(embedded, dim=1) @ first.weight[:, d:].t()
        return self.mlp[1:](h)


def leaf_grad(leaf: torch.Tensor) -> torch.Tensor:
    """The gradient `backward()` left on `leaf` (a tensor that requires grad), detached.

    Raises:
        ValueError: no gradient reached `leaf` (it was not part of the loss).
    """
    if leaf.grad is None:
        raise ValueError("no gradient reached a cut-layer activation: it is not in the loss")
    return leaf.grad.detach().clone()


def seeded_bottom(
    seed: int, salt: str, inputs: Inputs, emb_dim: int, hidden: Sequence[int], out_dim: int
) -> Bottom:
    bottom = Bottom(inputs.width, inputs.cardinalities, emb_dim, hidden, out_dim)
    return _reinit(bottom, _generator(seed, salt))
