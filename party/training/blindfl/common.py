"""What both roles of `protocol: blindfl` share: the secure settings from a party's inputs,
its feature matrix, closing its layers."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from party.training.context import RoleContext
from party.training.models import Inputs
from secure.config import SecureConfig

SPARSE_DENSITY = 0.3


def secure_config(ctx: RoleContext, inputs: Inputs) -> SecureConfig:
    dense = inputs.dense.numpy()
    integral = (
        bool(np.all(dense == np.round(dense))) and float(np.abs(dense).max(initial=0.0)) < 2**20
    )
    crypto = ctx.spec.crypto
    return SecureConfig(
        key_bits=crypto.key_bits,
        allow_insecure_test_keys=crypto.allow_insecure_test_keys,
        feature_bits=0 if integral else 16,
        timeout_s=ctx.timeout,
    )


def features(inputs: Inputs, rows: np.ndarray):
    """The dense rows as float64, CSR when sparse (the secure product then costs O(nnz))."""
    x = inputs.take(rows)[0].numpy().astype(np.float64)
    if x.size and np.count_nonzero(x) / x.size < SPARSE_DENSITY:
        return sp.csr_matrix(x)
    return x


def close_layers(*layers) -> None:
    for layer in layers:
        if layer is not None:
            layer.close()
