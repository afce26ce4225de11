"""Per-task label encoding, loss and metrics at the active party."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional as F
from vfl.party.errors import DataError
from vfl.party.training import metrics

MAX_CLASSES = 1000
PRIOR_CLIP = 1e-4  # class rates of the initial output bias stay in [1e-4, 1 - 1e-4]


@dataclass(frozen=True)
class Labels:
    """The active party's encoded labels of the training and of the validation rows; a
    trainer built only to score holds neither."""

    train: torch.Tensor | None = None
    val: torch.Tensor | None = None

    @staticmethod
    def encoded(task: Task, train: np.ndarray | None, val: np.ndarray | None) -> Labels:
        return Labels(*(None if raw is None else task.encode(raw) for raw in (train, val)))

    def of(self, rows: np.ndarray, validation: bool = False) -> torch.Tensor:
        """The labels of training rows `rows` (of validation rows with `validation`).

        Raises:
            ValueError: this trainer holds no labels (one built only to score).
        """
        y = self.val if validation else self.train
        if y is None:
            raise ValueError("a trainer built to score holds no labels to train or validate on")
        return y[rows]


@dataclass(frozen=True)
class Task:
    """Encodes raw labels and turns model outputs into losses and metrics."""

    kind: str
    out_dim: int
    classes: tuple[float, ...] = ()
    mean: float = 0.0
    std: float = 1.0

    def encode(self, raw: np.ndarray) -> torch.Tensor:
        if self.kind == "regression":
            return torch.as_tensor((raw - self.mean) / self.std, dtype=torch.float32)
        idx = np.searchsorted(np.asarray(self.classes), raw)
        if self.kind == "binary":
            return torch.as_tensor(idx, dtype=torch.float32)
        return torch.as_tensor(idx, dtype=torch.int64)

    def output_bias(self, target: torch.Tensor) -> np.ndarray:
        """The output layer's initial bias for encoded training labels `target`: the
        constant output that minimises the loss (binary: the log-odds of the positive
        rate; multiclass: the log class frequencies, centred; regression: the mean), so
        that training starts from the label prior instead of spending its first steps,
        and the optimisers' first accumulated squares, on finding it
        (docs/protocols.md §4, Initial output bias)."""
        y = target.detach().numpy().astype(np.float64)
        if self.kind == "regression":
            return np.array([y.mean() if y.size else 0.0])
        if self.kind == "binary":
            rate = float(np.clip(y.mean() if y.size else 0.5, PRIOR_CLIP, 1 - PRIOR_CLIP))
            return np.array([np.log(rate / (1 - rate))])
        counts = np.bincount(y.astype(np.int64), minlength=self.out_dim)[: self.out_dim]
        logs = np.log(np.clip(counts / max(y.size, 1), PRIOR_CLIP, 1.0))
        return logs - logs.mean()

    def losses(self, out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Per-instance losses (the mean is the training loss)."""
        if self.kind == "binary":
            return F.binary_cross_entropy_with_logits(out[:, 0], target, reduction="none")
        if self.kind == "multiclass":
            return F.cross_entropy(out, target, reduction="none")
        return (out[:, 0] - target) ** 2

    def scores(self, out: np.ndarray) -> dict[str, np.ndarray]:
        """The columns a prediction writes for the model's outputs, in order: binary,
        `score` (the probability of the second class) and `class`; multiclass, `p_<class>`
        per class and `class`; regression, `value` (in the label's units)."""
        if self.kind == "regression":
            return {"value": out[:, 0].astype(np.float64) * self.std + self.mean}
        classes = np.asarray(self.classes)
        if self.kind == "binary":
            p = 1.0 / (1.0 + np.exp(-out[:, 0].astype(np.float64)))
            return {"score": p, "class": _labels(classes[(p >= 0.5).astype(np.int64)])}
        z = out.astype(np.float64)
        e = np.exp(z - z.max(axis=1, keepdims=True))
        probs = e / e.sum(axis=1, keepdims=True)
        cols = {f"p_{_label(c)}": probs[:, i] for i, c in enumerate(self.classes)}
        return {**cols, "class": _labels(classes[probs.argmax(axis=1)])}

    def evaluate(self, out: np.ndarray, target: torch.Tensor) -> dict[str, float]:
        y = target.numpy()
        if self.kind == "binary":
            return metrics.binary_metrics(y, out[:, 0])
        if self.kind == "multiclass":
            return metrics.multiclass_metrics(y, out)
        return metrics.regression_metrics(
            y * self.std + self.mean, out[:, 0] * self.std + self.mean
        )


def _label(value: float) -> str:
    return str(int(value)) if value == int(value) else str(value)


def _labels(values: np.ndarray) -> np.ndarray:
    return np.array([_label(float(v)) for v in values], dtype=object)


def make_task(kind: str, labels: np.ndarray) -> Task:
    """Inspect the label column for the task.

    Raises:
        DataError: the labels do not fit the task (names the fix).
    """
    if kind == "regression":
        std = float(np.std(labels))
        return Task(kind, 1, mean=float(np.mean(labels)), std=std if std > 0 else 1.0)
    classes = tuple(float(c) for c in np.unique(labels))
    if kind == "binary":
        if len(classes) != 2:
            fix = "use task: multiclass or regression, or fix the labels"
            raise DataError(
                f"task is binary but the label column has {len(classes)} distinct value(s) "
                f"{list(classes)[:5]}; {fix}",
                public=(  # the values are the party's own: they stay in its log
                    f"task is binary but the label column has {len(classes)} distinct "
                    f"value(s); {fix}"
                ),
            )
        return Task(kind, 1, classes)
    if not 2 <= len(classes) <= MAX_CLASSES:
        raise DataError(
            f"task is multiclass but the label has {len(classes)} classes; need 2..{MAX_CLASSES}"
        )
    if any(c != int(c) for c in classes):
        raise DataError(
            "multiclass labels must be integers (class ids); use task: regression "
            "for real-valued labels"
        )
    return Task(kind, len(classes), classes)
