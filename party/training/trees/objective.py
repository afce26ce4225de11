"""The loss a tree ensemble boosts, per task, at the active party: the first and second
derivatives (g, h) of each row's loss at the current margins, the loss itself, and the
margins' start (the label prior, `Task.output_bias`).

    binary       logistic loss of the margin: g = p - y, h = p (1 - p)
    multiclass   softmax cross-entropy, one margin per class: g_k = p_k - [y = k],
                 h_k = K / (K - 1) p_k (1 - p_k) (LightGBM's diagonal approximation)
    regression   squared error of the standardised label (`Task.encode`): g = m - y, h = 1

Labels are `Task.encode`'s (binary 0/1, class indices, standardised values); margins are
rows x K (K: 1, or the classes of a multiclass task).
"""

from __future__ import annotations

import numpy as np
import torch
from vfl.party.training.task import Task

MIN_HESSIAN = 1e-16  # a row whose p is 0 or 1 still weighs something


class Objective:
    def __init__(self, task: Task) -> None:
        self.task = task
        self.kind = task.kind
        self.k = task.out_dim

    def start(self, labels: np.ndarray) -> np.ndarray:
        """The margins' start (K values): the training labels' prior."""
        return np.asarray(self.task.output_bias(torch.as_tensor(labels)), dtype=np.float64)

    def gradients(self, margins: np.ndarray, labels: np.ndarray) -> np.ndarray:
        """(g, h) of each row: rows x 2K, tree k's in columns 2k and 2k + 1."""
        g, h = self._derivatives(margins, labels)
        gh = np.empty((len(margins), 2 * self.k))
        gh[:, 0::2], gh[:, 1::2] = g, h
        return gh

    def _derivatives(self, m: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.kind == "binary":
            p = _sigmoid(m)
            return p - y[:, None], np.maximum(p * (1 - p), MIN_HESSIAN)
        if self.kind == "multiclass":
            p = _softmax(m)
            onehot = np.zeros_like(p)
            onehot[np.arange(len(y)), y.astype(np.int64)] = 1.0
            factor = self.k / (self.k - 1)
            return p - onehot, np.maximum(factor * p * (1 - p), MIN_HESSIAN)
        return m - y[:, None], np.ones_like(m)

    def loss(self, margins: np.ndarray, labels: np.ndarray) -> float:
        """The mean loss of rows with `margins` and `labels` (nan for no rows)."""
        if not len(labels):
            return float("nan")
        m, y = margins, labels
        if self.kind == "binary":
            z = m[:, 0]
            return float(np.mean(np.logaddexp(0.0, z) - y * z))
        if self.kind == "multiclass":
            top = m.max(axis=1, keepdims=True)
            logsum = np.log(np.exp(m - top).sum(axis=1)) + top[:, 0]
            return float(np.mean(logsum - m[np.arange(len(y)), y.astype(np.int64)]))
        return float(np.mean((m[:, 0] - y) ** 2))


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)
