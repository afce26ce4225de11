"""What both roles of `protocol: blindfl` share: the secure settings from a party's inputs,
its feature matrix, its key pair and layers across a checkpoint, closing its layers."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import scipy.sparse as sp
from vfl.contract.spec import JobSpec
from vfl.party.errors import CheckpointError, JobError
from vfl.party.training.context import RoleContext
from vfl.party.training.inputs import Inputs
from vfl.party.training.plan import Plan
from vfl.secure.config import DENSE_FEATURE_BITS, SecureConfig
from vfl.secure.errors import ConfigError as SecureConfigError
from vfl.secure.lattice.params import BfvParams
from vfl.secure.paillier.keys import KeyPair
from vfl.secure.source_layers.matmul.bfv.setup import range_bits
from vfl.secure.source_layers.state import keypair_from_state

SPARSE_DENSITY = 0.3


class SavedLayer(Protocol):
    def load_state_dict(self, state: dict[str, Any]) -> None: ...


def secure_config(ctx: RoleContext, inputs: Inputs) -> SecureConfig:
    """The secure settings; integral features (checked on the stored values: a sparse
    matrix's nonzeros) need no fractional bits."""
    values = inputs.nonzeros()
    integral = (
        bool(np.all(values == np.round(values))) and float(np.abs(values).max(initial=0.0)) < 2**20
    )
    crypto = ctx.spec.crypto
    return SecureConfig(
        key_bits=crypto.key_bits,
        allow_insecure_test_keys=crypto.allow_insecure_test_keys,
        fresh_obfuscators=crypto.obfuscators,
        feature_bits=0 if integral else DENSE_FEATURE_BITS,
        timeout_s=ctx.timeout,
        counts=ctx.instruments.op_counts,
        executor=ctx.executor,
    )


def bfv_params(spec: JobSpec, config: SecureConfig) -> BfvParams:
    """The BFV parameters of `spec.crypto.bfv`, with the plaintext modulus 2^(f_Z + 8)
    (a value read back satisfies |v| < 2^(7 - ...) as Paillier's slots do)."""
    bfv = spec.crypto.bfv
    return BfvParams(
        poly_degree=bfv.poly_degree,
        coeff_bits=tuple(bfv.coeff_bits),
        plain_bits=config.output_bits + 8,
        stat_bits=bfv.stat_bits,
    )


def check_bfv_params(spec: JobSpec, party_id: str) -> None:
    """With `crypto.scheme: bfv`, refuse at PREPARE parameters below 128-bit security or
    that SEAL cannot use, naming the field and the fix.

    Raises:
        JobError: the parameters are refused.
    """
    if spec.protocol != "blindfl" or spec.crypto.scheme != "bfv":
        return
    try:
        bfv_params(spec, SecureConfig()).validate()
    except SecureConfigError as exc:
        message = f"party '{party_id}': {exc}"
        raise JobError(message, public=message) from None


def check_bfv_range(ctx: RoleContext, inputs: Inputs, config: SecureConfig) -> None:
    """With `crypto.scheme: bfv`, refuse features beyond the BFV layer's fixed-point range
    before any key is made (`secure.source_layers.matmul.bfv.setup`: |x| < 2^7 for real
    features, 2^20 for integer ones), naming the column.

    Raises:
        JobError: a column beyond the range.
    """
    if ctx.spec.crypto.scheme != "bfv" or inputs.width == 0:
        return
    x = inputs.x
    peak = (
        np.asarray(abs(sp.csr_matrix(x)).max(axis=0).toarray()).ravel()
        if sp.issparse(x)
        else np.abs(np.asarray(x)).max(axis=0)
    )
    limit = float(2 ** range_bits(config.feature_bits))
    bad = np.flatnonzero(~(peak < limit))
    if bad.size:
        raise JobError(
            f"party '{ctx.party_id}': crypto.scheme: bfv takes features within +-{limit:g}, "
            f"and dense column {int(bad[0])} reaches {float(peak[bad[0]]):.4g} "
            f"({bad.size} column(s) beyond); standardise them, or use crypto.scheme: paillier"
        )


def trained_config(config: SecureConfig, state: dict[str, Any]) -> SecureConfig:
    """`config` with the fixed-point scale the layers were trained with (the scale
    `secure_config` derives from other rows, e.g. those to score, may differ)."""
    bits = state.get("feature_bits")
    return config if bits is None else dataclasses.replace(config, feature_bits=int(bits))


def features(inputs: Inputs, rows: np.ndarray):
    """The numeric rows as float64, CSR when sparse (the secure product then costs
    O(nnz)): sparse inputs stay CSR, dense ones become CSR when mostly zeros."""
    x = inputs.features(rows)
    if not sp.issparse(x) and x.size and np.count_nonzero(x) / x.size < SPARSE_DENSITY:
        return sp.csr_matrix(x)
    return x


ROW_SETS = ("train", "val")  # sets of rows whose m1 may be made once per job


class RowSets:
    """Which row sets' m1 the MatMul layer made once (`secure.source_layers.matmul.row_shares`):
    both parties decide alike from the plan and the layer's packing."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.names: set[str] = set()

    def precompute(self, layer: Any, make: Callable[[str, np.ndarray], None]) -> None:
        """Call `make(name, positions)` for each set whose rows are used often enough, in
        the same order at every party."""
        for name in ROW_SETS:
            positions = self.plan.rows_of(name)
            if len(positions) and layer.precompute_pays(self.plan.uses(name)):
                make(name, positions)
                self.names.add(name)

    def ref(self, name: str | None, rows: np.ndarray) -> tuple[str, np.ndarray] | None:
        """(set, indices into it) of `rows` (positions) if that set was precomputed."""
        if name is None or name not in self.names:
            return None
        positions = self.plan.rows_of(name)
        return name, np.searchsorted(positions, rows)


def saved_keypair(ctx: RoleContext, config: SecureConfig, state: dict[str, Any]) -> KeyPair:
    """This party's own key pair from its checkpoint (never from anywhere else).

    Raises:
        StateError, PaillierKeyError: the key pair of another party or size, or corrupt.
    """
    return keypair_from_state(state["keypair"], ctx.party_id, config)


def load_layer(ctx: RoleContext, name: str, layer: SavedLayer | None, state: dict) -> None:
    """Load `state[name]` into `layer` (either both exist or neither).

    Raises:
        CheckpointError: the checkpoint has that layer and the party not, or the reverse.
        StateError, PaillierKeyError: the saved state does not fit the layer.
    """
    saved = state.get(name)
    if (layer is None) != (saved is None):
        has = "holds" if saved is not None else "lacks"
        raise CheckpointError(
            f"party '{ctx.party_id}': its checkpoint {has} a '{name}' source layer, which "
            "its data does not call for now; restart the job"
        )
    if layer is not None and saved is not None:
        layer.load_state_dict(saved)


def close_layers(*layers) -> None:
    for layer in layers:
        if layer is not None:
            layer.close()
