"""A MatMul source layer job for tests: secure layers over a hub, parties as threads, and
the plaintext model with the same initial weights W = U + V that they must track."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from vfl.secure.channel import InProcessHub
from vfl.secure.source_layers.matmul import ActiveSourceLayer, PassiveSourceLayer
from vfl.secure.source_layers.steps import SourceOptimizer

from tests.support.secure import config_for_tests, run_parties

RTOL = 1e-4
LR = 0.1


@dataclass
class Job:
    """Secure layers of one test plus the plaintext model they must track."""

    active: ActiveSourceLayer
    passives: list[PassiveSourceLayer]
    weights: dict[str, np.ndarray]
    envelopes: list[tuple[str, str, bytes]] = field(default_factory=list)
    reference: PlainAdagrad | None = None  # the plaintext rule with `rule="adagrad"`


class PlainAdagrad:
    """The preconditioned rule of `secure.source_layers.steps`, written out in plaintext
    for the reference model: column step sizes from G, per-feature factors c (rounded at
    feature_bits 0), Adagrad on W_B and the bias."""

    def __init__(self, factors: dict[str, np.ndarray], feature_bits: int) -> None:
        self.factors = {
            pid: np.maximum(np.round(c), 1) if feature_bits == 0 else c
            for pid, c in factors.items()
        }
        self.columns = 0.0
        self.sums: dict[str, np.ndarray] = {}
        self.feature_bits = feature_bits

    def step(self, w: dict[str, np.ndarray], xs, x_b, grad: np.ndarray) -> None:
        self.columns = self.columns + (grad**2).sum(axis=0)
        passive = LR * grad / (np.sqrt(self.columns) + 1e-10)
        for name, g in (("W_B", x_b.T @ grad), ("bias", grad.sum(axis=0))):
            self.sums[name] = self.sums.get(name, 0.0) + g**2
            w[name] -= LR * g / (np.sqrt(self.sums[name]) + 1e-10)
        for pid, x in xs.items():
            scaled = np.asarray(x.todense() if sp.issparse(x) else x) * self.factors[pid]
            w[f"W_A/{pid}"] -= on_grid(scaled, self.feature_bits).T @ passive  # as encoded


def make_job(
    test_keys,
    k=1,
    d_a=6,
    d_b=4,
    h=5,
    config_a=None,
    config_b=None,
    seed=0,
    hub=None,
    rule="sgd",
):
    """With `rule="adagrad"`: B's SourceOptimizer and per-feature step factors at every
    passive party, tracked by `Job.reference`."""
    rng = np.random.default_rng(seed)
    factors = {f"A{i + 1}": rng.uniform(0.5, 3.0, size=d_a) for i in range(k)}
    ids = [f"A{i + 1}" for i in range(k)]
    hub, envelopes = hub or InProcessHub(), []

    def hook(direction, sender, receiver, tag, data):
        if direction == "sent":
            envelopes.append((tag, receiver, data))

    init_b = {"V_B": rng.normal(size=(d_b, h)) * 0.3, "bias": rng.normal(size=h) * 0.1}
    weights = {"W_B": init_b["V_B"].copy(), "bias": init_b["bias"].copy()}
    passives = []
    for pid in ids:
        init_a = {"U_A": rng.normal(size=(d_a, h)) * 0.3, "U_B": rng.normal(size=(d_b, h)) * 0.3}
        init_b[f"V_A/{pid}"] = rng.normal(size=(d_a, h)) * 0.3
        weights[f"W_A/{pid}"] = init_a["U_A"] + init_b[f"V_A/{pid}"]
        weights["W_B"] = weights["W_B"] + init_a["U_B"]
        passives.append(
            PassiveSourceLayer(
                hub.channel(pid, hook),
                "B",
                d_a,
                h,
                config_a or config_for_tests(),
                7,
                init_a,
                keypair=test_keys[pid],
                step_factors=None if rule == "sgd" else factors[pid],
            )
        )
    active = ActiveSourceLayer(
        hub.channel("B", hook),
        ids,
        d_b,
        h,
        config_b or config_for_tests(),
        3,
        init_b,
        keypair=test_keys["B"],
        optimizer=SourceOptimizer(rule),
    )
    run_parties(lambda: active.setup("setup"), *[lambda p=p: p.setup("setup") for p in passives])
    bits = (config_a or config_for_tests()).feature_bits
    reference = None if rule == "sgd" else PlainAdagrad(factors, bits)
    return Job(active, passives, weights, envelopes, reference)


def on_grid(x: np.ndarray, bits: int) -> np.ndarray:
    """x rounded to the fixed-point grid 2^-bits that the secure layer computes on, so
    that the plaintext model sees the same inputs (the scale's own error is an accuracy
    question, measured by the training tests, not a protocol one)."""
    return np.round(x * 2.0**bits) / 2.0**bits


def batch(rng, job: Job, n: int, sparse: bool, binary: bool = False):
    xs = {}
    for p in job.passives:
        x = on_grid(rng.normal(size=(n, p.in_dim)), p.config.feature_bits)
        if binary:
            x = (x > 0.5).astype(float)
        if sparse:
            x[rng.random(size=x.shape) < 0.7] = 0.0
            x = sp.csr_matrix(x)
        xs[p.channel.party_id] = x
    return xs, on_grid(rng.normal(size=(n, job.active.in_dim)), job.active.config.feature_bits)


def plain_forward(w, xs, x_b) -> np.ndarray:
    z = x_b @ w["W_B"] + w["bias"]
    return z + sum(np.asarray(x @ w[f"W_A/{pid}"]) for pid, x in xs.items())


def secure_step(job: Job, tag, xs, x_b, target, rows=None) -> np.ndarray:
    """One forward and backward step (`rows`: of a precomputed row set, see
    `secure.source_layers.matmul.row_shares`)."""
    calls = [lambda p=p: p.forward(tag, xs[p.channel.party_id], rows) for p in job.passives]
    z = run_parties(lambda: job.active.forward(tag, x_b, rows), *calls)[0]
    grad = (z - target) / len(z)
    calls = [lambda p=p: p.backward(tag, LR) for p in job.passives]
    run_parties(lambda: job.active.backward(tag, grad, LR), *calls)
    return z


def plain_step(w, xs, x_b, target, reference: PlainAdagrad | None = None) -> np.ndarray:
    z = plain_forward(w, xs, x_b)
    grad = (z - target) / len(z)
    if reference is not None:
        reference.step(w, xs, x_b, grad)
        return z
    w["W_B"] -= LR * x_b.T @ grad
    w["bias"] -= LR * grad.sum(axis=0)
    for pid, x in xs.items():
        w[f"W_A/{pid}"] -= LR * np.asarray(x.T @ grad)
    return z


def close(job: Job) -> None:
    job.active.close()
    for p in job.passives:
        p.close()
