"""Torch building blocks: bottom MLPs, the top model, optimisers, seeded initialisation."""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Sequence
from typing import TypeAlias, TypeVar

import numpy as np
import scipy.sparse as sp
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
Rows: TypeAlias = torch.Tensor | sp.csr_matrix  # a batch of numeric features: dense, or CSR


class Inputs:
    """A party's aligned inputs: numeric features (a dense array, or a CSR matrix for
    sparse data such as LIBSVM, kept sparse all the way to the layer) and optional
    categorical codes. `take(rows)` gives a batch; `features(rows)` the same numeric rows
    as numpy or CSR float64 (the secure layers' input)."""

    def __init__(
        self,
        dense: np.ndarray | sp.spmatrix,
        categorical: np.ndarray | None,
        cardinalities: Sequence[int] = (),
    ) -> None:
        self.x: np.ndarray | sp.csr_matrix = (
            sp.csr_matrix(dense, dtype=np.float32)
            if sp.issparse(dense)
            else np.asarray(dense, dtype=np.float32)
        )
        self.cat = None if categorical is None else torch.as_tensor(categorical, dtype=torch.int64)
        self.cardinalities = tuple(cardinalities)

    @property
    def sparse(self) -> bool:
        return sp.issparse(self.x)

    @property
    def rows(self) -> int:
        return int(self.x.shape[0])

    @property
    def width(self) -> int:
        """How many numeric columns."""
        return int(self.x.shape[1])

    @property
    def empty(self) -> bool:
        return self.width == 0 and self.cat is None

    def subset(self, rows: np.ndarray) -> Inputs:
        """These inputs' `rows`, in that order."""
        cat = None if self.cat is None else self.cat[torch.as_tensor(rows)].numpy()
        return Inputs(self.x[rows], cat, self.cardinalities)

    def with_zero_row(self) -> Inputs:
        """These inputs and one more row of zeros after the last."""
        zero = np.zeros((1, self.width), dtype=np.float32)
        x = sp.vstack([self.x, sp.csr_matrix(zero)], format="csr") if self.sparse else None
        cat = None
        if self.cat is not None:
            cat = np.vstack([self.cat.numpy(), np.zeros((1, self.cat.shape[1]), np.int64)])
        return Inputs(np.vstack([self.x, zero]) if x is None else x, cat, self.cardinalities)

    def take(self, rows: np.ndarray) -> tuple[Rows, torch.Tensor | None]:
        """The numeric features of `rows` (a float32 tensor, or a CSR matrix when sparse)
        and their categorical codes; `Bottom` and `mlp_forward` take either."""
        x = self.x[rows]
        cat = None if self.cat is None else self.cat[torch.as_tensor(rows, dtype=torch.int64)]
        return (x if self.sparse else torch.from_numpy(x)), cat

    def codes(self, rows: np.ndarray) -> np.ndarray:
        """The categorical codes of `rows`, as int64.

        Raises:
            ValueError: these inputs have no categorical columns.
        """
        if self.cat is None:
            raise ValueError("these inputs have no categorical columns")
        return self.cat[torch.as_tensor(rows, dtype=torch.int64)].numpy()

    def features(self, rows: np.ndarray) -> np.ndarray | sp.csr_matrix:
        """The numeric features of `rows` as float64: CSR when sparse, else an array."""
        x = self.x[rows]
        return sp.csr_matrix(x, dtype=np.float64) if self.sparse else x.astype(np.float64)

    def nonzeros(self) -> np.ndarray:
        """Every stored value (a sparse matrix's nonzeros; all of a dense array)."""
        return np.asarray(self.x.data) if self.sparse else self.x.ravel(order="K")


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
