"""Validation metrics per task, in numpy (no sklearn)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np


def auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve by the rank statistic, ties averaged."""
    labels = np.asarray(labels).astype(bool)
    pos, neg = int(labels.sum()), int((~labels).sum())
    if pos == 0 or neg == 0:
        return float("nan")
    order = np.argsort(scores, kind="mergesort")
    sorted_scores = np.asarray(scores)[order]
    ranks = np.empty(len(scores), dtype=np.float64)
    i = 0
    while i < len(sorted_scores):
        j = i
        while j + 1 < len(sorted_scores) and sorted_scores[j + 1] == sorted_scores[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return float((ranks[labels].sum() - pos * (pos + 1) / 2.0) / (pos * neg))


def ks(labels: np.ndarray, scores: np.ndarray) -> float:
    """Kolmogorov-Smirnov statistic: the largest gap between the score distributions of
    the positive and the negative rows (the largest |TPR - FPR| over thresholds, ties
    taken together), as a credit risk team reads it."""
    labels = np.asarray(labels).astype(bool)
    pos, neg = int(labels.sum()), int((~labels).sum())
    if pos == 0 or neg == 0:
        return float("nan")
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="mergesort")
    ranked, hits = np.asarray(scores, dtype=np.float64)[order], labels[order]
    tpr, fpr = np.cumsum(hits) / pos, np.cumsum(~hits) / neg
    ends = np.r_[np.flatnonzero(np.diff(ranked) != 0), len(ranked) - 1]  # a tie's last row
    return float(np.max(np.abs(tpr[ends] - fpr[ends])))


def binary_metrics(labels: np.ndarray, logits: np.ndarray) -> dict[str, float]:
    prob = 1.0 / (1.0 + np.exp(-logits))
    eps = 1e-12
    logloss = -np.mean(labels * np.log(prob + eps) + (1 - labels) * np.log(1 - prob + eps))
    area = auc(labels, logits)
    return {
        "auc": area,
        "gini": 2.0 * area - 1.0,
        "ks": ks(labels, logits),
        "accuracy": float(np.mean((prob >= 0.5) == (labels >= 0.5))),
        "logloss": float(logloss),
    }


def multiclass_metrics(labels: np.ndarray, logits: np.ndarray) -> dict[str, float]:
    return {"accuracy": float(np.mean(np.argmax(logits, axis=1) == labels))}


def regression_metrics(labels: np.ndarray, preds: np.ndarray) -> dict[str, float]:
    err = preds - labels
    var = float(np.var(labels))
    return {
        "rmse": float(np.sqrt(np.mean(err**2))),
        "r2": float(1.0 - np.mean(err**2) / var) if var > 0 else float("nan"),
    }


# why a metric has no value, when it is NaN for these rows (not because training failed)
UNDEFINED = {
    "auc": "the rows validated on hold one class only; use more rows or a larger "
    "validation.fraction",
    "gini": "the rows validated on hold one class only (Gini is 2 AUC - 1)",
    "ks": "the rows validated on hold one class only; use more rows or a larger "
    "validation.fraction",
    "r2": "the labels validated on do not vary",
}


def split_metrics(metrics: Mapping[str, float]) -> tuple[dict[str, float], dict[str, str]]:
    """A task's metrics as the numbers a report carries, and those without a value, each
    with why: an AUC over rows of one class is undefined, an infinite or NaN loss means
    the model diverged. Only finite numbers cross to the coordinator."""
    numbers = {k: float(v) for k, v in metrics.items() if math.isfinite(v)}
    undefined = {
        k: UNDEFINED[k]
        if math.isnan(v) and k in UNDEFINED
        else f"not finite ({v}): the model diverged; lower train.lr"
        for k, v in metrics.items()
        if not math.isfinite(v)
    }
    return numbers, undefined
