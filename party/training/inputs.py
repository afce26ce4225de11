"""A party's aligned inputs to its model part, whatever the model kind: numeric features
(dense, or CSR for sparse data such as LIBSVM) and categorical codes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

import numpy as np
import scipy.sparse as sp
import torch

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
