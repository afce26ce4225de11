"""The checks of what a source layer's caller hands in: features, steps, learning rates,
party ids, test-only initial shares; and of the active party's key size as a passive
party sees it. Each raises a named error before anything is sent."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from vfl.secure.channel import Channel
from vfl.secure.config import SecureConfig
from vfl.secure.errors import ConfigError, InputError, PayloadError
from vfl.secure.source_layers.common import Features, InitialShares
from vfl.secure.source_layers.sharing import sample_share


def check_features(x: Features, in_dim: int, rows: int | None = None) -> Features:
    """Check a feature batch (dense 2-D array or scipy sparse); sparse becomes CSR.

    Raises:
        InputError: wrong type, shape, or NaN/infinite values.
    """
    if sp.issparse(x):
        x = sp.csr_matrix(x, dtype=np.float64)
        values = np.asarray(x.data)
    else:
        x = np.asarray(x, dtype=np.float64)
        values = x
    if x.ndim != 2 or x.shape[1] != in_dim or (rows is not None and x.shape[0] != rows):
        want = f"({rows if rows is not None else 'N'}, {in_dim})"
        raise InputError(f"features must have shape {want}, got {x.shape}")
    if not np.all(np.isfinite(values)):
        raise InputError("features contain NaN or infinite values; clean them first")
    return x


def check_lr(lr: float) -> None:
    """Raises:
    InputError: lr is not a positive finite number.
    """
    if not (np.isfinite(lr) and lr > 0):
        raise InputError(f"lr must be a positive finite number, got {lr}")


def check_step(grad: np.ndarray, lr: float, shape: tuple[int, int]) -> np.ndarray:
    """lr * grad, checked (B's step before it is encrypted into m3).

    Raises:
        InputError: wrong shape, non-finite values or a non-positive lr.
    """
    g = np.asarray(grad, dtype=np.float64)
    if g.shape != shape:
        raise InputError(f"grad_z must have shape {shape}, got {g.shape}")
    if not (np.isfinite(lr) and lr > 0) or not np.all(np.isfinite(g)):
        raise InputError("lr must be a positive number and grad_z finite")
    return lr * g


def check_passive_ids(channel: Channel, passive_ids: Sequence[str]) -> list[str]:
    """The active party's list of passive parties, checked.

    Raises:
        ConfigError: no passive party, a duplicate, or the active party itself among them.
    """
    ids = list(passive_ids)
    if not ids or len(set(ids)) != len(ids) or channel.party_id in ids:
        raise ConfigError(f"passive_ids must be distinct other parties, got {ids}")
    return ids


def check_init(init: InitialShares | None, name: str, shape: tuple[int, ...]) -> np.ndarray | None:
    """A test-supplied initial share, shape-checked, or None.

    Raises:
        InputError: wrong shape or non-finite values.
    """
    if not init or name not in init:
        return None
    value = np.asarray(init[name], dtype=np.float64)
    if value.shape != shape or not np.all(np.isfinite(value)):
        raise InputError(f"init['{name}'] must be a finite array of shape {shape}")
    return value.copy()


def initial_share(
    init: InitialShares, name: str, rows: int, out_dim: int, rng: np.random.Generator
) -> np.ndarray:
    """A share of a weight matrix (rows x out_dim): `init[name]` (tests) or `sample_share`.

    Raises:
        InputError: `init[name]` has the wrong shape or non-finite values.
    """
    value = check_init(init, name, (rows, out_dim))
    return sample_share(rng, rows, out_dim) if value is None else value


def check_active_key_bits(active_key_bits: int, config: SecureConfig) -> None:
    """A passive party's check of the key size in the active party's layer parameters.

    Raises:
        PayloadError: the active party uses another key size than this party.
    """
    if active_key_bits != config.key_bits:
        raise PayloadError(
            f"the active party uses {active_key_bits}-bit keys, this party "
            f"{config.key_bits}; set the same SecureConfig.key_bits everywhere"
        )
