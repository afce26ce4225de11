"""Step sizes of the MatMul source layer that each party derives from what it knows in
plaintext, so that the update stays one ciphertext product (docs/protocols.md §4, Backward).

The weights W_A = U_A + V_A over a passive party's features are shared and partly
encrypted; no party sees their gradient X_A^T G, so no party can run Adagrad or Adam on
them element by element. The step is preconditioned per output column and per feature
instead, by the party that knows each factor:

    dW_A[j, k] = c_j * sum_i x_ij * (eta * d_k * G_ik)

- B knows G = dL/dZ: `SourceOptimizer.passive_step` scales column k of eta*G by
  d_k = 1/sqrt(sum over steps of sum_i G_ik^2) (Adagrad) or by the bias-corrected
  running mean of the same (Adam) before encrypting it as m3.
- A_k knows X_A: `feature_step_factors` gives c_j = 1/sqrt(mean_i x_ij^2) over its own
  training rows, multiplied into column j of X_A before the update's fixed-point encoding.

For rows independent of each other, E[(X^T G)_jk^2] = mean(x_j^2) sum_i G_ik^2, so the
product c_j d_k is the Adagrad step of element (j, k) with its accumulator replaced by
that expectation: rare features get large steps, as with Adagrad. B's own plaintext share
V_B and the bias get the spec's optimiser itself on their full gradients (W_B = V_B +
sum_k U_B^k, and the U_B^k are fixed). `optimizer: sgd` is plain SGD everywhere.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from vfl.secure.errors import ConfigError, StateError

RULES = ("sgd", "adagrad", "adam")
EPS = 1e-10  # torch's Adagrad epsilon
ADAM_BETAS, ADAM_EPS = (0.9, 0.999), 1e-8  # torch's Adam defaults


class SourceOptimizer:
    """B's optimiser of the MatMul source layer: the step it encrypts for the passive
    parties, and its own plaintext share and bias (torch's Adagrad, Adam and SGD formulas
    with their default settings, in numpy)."""

    def __init__(self, rule: str = "sgd") -> None:
        """Raises:
        ConfigError: `rule` is not one of RULES.
        """
        if rule not in RULES:
            raise ConfigError(f"the source optimiser must be one of {RULES}, got {rule!r}")
        self.rule = rule
        self._columns: np.ndarray | None = None  # the G^2 accumulator per output column
        self._steps = 0  # passive steps taken (Adam's bias correction)
        self._own: dict[str, dict[str, Any]] = {}  # per own tensor: its optimiser state

    def passive_step(self, grad_z: np.ndarray, lr: float) -> np.ndarray:
        """eta * G with column k scaled by d_k (module doc); updates the accumulator."""
        if self.rule == "sgd":
            return lr * grad_z
        squares = np.square(grad_z).sum(axis=0)
        if self._columns is None:
            self._columns = np.zeros(grad_z.shape[1])
        self._steps += 1
        if self.rule == "adagrad":
            self._columns = self._columns + squares
            scale = np.sqrt(self._columns)
        else:
            beta2 = ADAM_BETAS[1]
            self._columns = beta2 * self._columns + (1 - beta2) * squares
            scale = np.sqrt(self._columns / (1 - beta2**self._steps))
        return np.asarray(lr * grad_z / (scale + EPS), dtype=np.float64)

    def own_step(self, name: str, param: np.ndarray, grad: np.ndarray, lr: float) -> np.ndarray:
        """`param` after one step on `grad` (a new array; `param` is left as it was)."""
        if self.rule == "sgd":
            return param - lr * grad
        state = self._own.setdefault(name, {"t": 0, "sum": np.zeros_like(param)})
        state["t"] += 1
        if self.rule == "adagrad":
            total: np.ndarray = state["sum"] + grad * grad
            state["sum"] = total
            return np.asarray(param - lr * grad / (np.sqrt(total) + EPS), dtype=np.float64)
        (beta1, beta2), t = ADAM_BETAS, state["t"]
        mean: np.ndarray = beta1 * state.get("mean", np.zeros_like(param)) + (1 - beta1) * grad
        total = beta2 * state["sum"] + (1 - beta2) * grad * grad
        state["mean"], state["sum"] = mean, total
        denom = np.sqrt(total / (1 - beta2**t)) + ADAM_EPS
        step: np.ndarray = lr / (1 - beta1**t) * mean / denom
        return np.asarray(param - step, dtype=np.float64)

    def state_dict(self) -> dict[str, Any]:
        """The accumulators, as plain values (for B's checkpoints only)."""
        return {
            "rule": self.rule,
            "columns": None if self._columns is None else self._columns.copy(),
            "steps": self._steps,
            "own": {
                name: {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in s.items()}
                for name, s in self._own.items()
            },
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Raises:
        StateError: saved for another rule.
        """
        if state.get("rule") != self.rule:
            raise StateError(
                f"the saved source optimiser is {state.get('rule')!r}, this job's {self.rule!r}"
            )
        columns = state["columns"]
        self._columns = None if columns is None else np.asarray(columns, dtype=np.float64)
        self._steps = int(state["steps"])
        self._own = {
            str(name): {k: (np.asarray(v) if k != "t" else int(v)) for k, v in s.items()}
            for name, s in state["own"].items()
        }


def feature_step_factors(x: np.ndarray | sp.spmatrix) -> np.ndarray:
    """A passive party's per-feature step factors c_j = 1/sqrt(mean_i x_ij^2) from its own
    training rows (1 for a feature that is always 0); they never leave the party."""
    if sp.issparse(x):
        squares = np.asarray(sp.csr_matrix(x).multiply(x).mean(axis=0)).ravel()
    else:
        squares = np.mean(np.square(np.asarray(x, dtype=np.float64)), axis=0)
    factors = np.ones(squares.shape[0])
    seen = squares > 0
    factors[seen] = 1 / np.sqrt(squares[seen])
    return factors


def scaled_columns(
    x: np.ndarray | sp.csr_matrix, factors: np.ndarray | None, feature_bits: int
) -> np.ndarray | sp.csr_matrix:
    """`x` with column j multiplied by factors[j], as the backward product encodes it: at
    feature_bits 0 (integer features, whose products are ciphertext additions) each
    factor is rounded to an integer of at least 1."""
    if factors is None:
        return x
    if feature_bits == 0:
        factors = np.maximum(np.round(factors), 1.0)
    if sp.issparse(x):
        return sp.csr_matrix(x @ sp.diags(factors))
    return x * factors
