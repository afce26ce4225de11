"""The statistics the attacks and their evaluation share: AUC and its chance band under
the null, R², ridge regression with its penalty chosen by generalised cross-validation,
and an L2 logistic head. Pure numpy and scipy; nothing here knows a party."""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import minimize
from scipy.stats import rankdata
from vfl.attack.errors import AttackError

ALPHAS = tuple(10.0**e for e in range(-4, 5))  # ridge penalties tried (on standardised inputs)


def auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """The area under the ROC curve of `scores` for 0/1 `labels` (Mann-Whitney, ties
    counted half).

    Raises:
        AttackError: the labels hold only one class.
    """
    y = np.asarray(labels).astype(bool)
    n1, n0 = int(y.sum()), int((~y).sum())
    if n1 == 0 or n0 == 0:
        raise AttackError("an AUC needs both classes among the scored rows")
    ranks = rankdata(np.asarray(scores, dtype=np.float64))
    return float((ranks[y].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def auc_se(n1: int, n0: int) -> float:
    """The standard error of an AUC under the null (scores independent of labels):
    sqrt((n1 + n0 + 1) / (12 n1 n0))."""
    return math.sqrt((n1 + n0 + 1) / (12 * n1 * n0))


def chance_band(n1: int, n0: int, centre: float = 0.5) -> tuple[float, float]:
    """`centre` +- max(0.02, 4 standard errors under the null), within [0, 1]."""
    half = max(0.02, 4 * auc_se(n1, n0))
    return max(0.0, centre - half), min(1.0, centre + half)


def clustered_band(
    scores: np.ndarray, labels: np.ndarray, groups: np.ndarray, draws: int = 400, seed: int = 0
) -> tuple[float, float]:
    """The chance band of an AUC whose examples come in correlated groups (the rows of
    one training round, which share the values read from one ciphertext): 0.5 +- the
    larger of `chance_band`'s half-width and 4 standard deviations of the AUC when the
    labels of a random half of the groups are flipped, group by group (a view that
    carries nothing gives each group's two runs the same distribution)."""
    y = np.asarray(labels).astype(bool)
    ranks = rankdata(np.asarray(scores, dtype=np.float64))
    _, group = np.unique(groups, return_inverse=True)
    rng = np.random.default_rng(seed)
    aucs = []
    for _ in range(draws):
        flip = rng.random(group.max() + 1) < 0.5
        pos = y ^ flip[group]
        n1, n0 = int(pos.sum()), int((~pos).sum())
        if n1 and n0:
            aucs.append((ranks[pos].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))
    low, high = chance_band(int(y.sum()), int((~y).sum()))
    half = max(high - 0.5, 4 * float(np.std(aucs)) if aucs else 0.0)
    return max(0.0, 0.5 - half), min(1.0, 0.5 + half)


def standardise(x: np.ndarray, ref: np.ndarray | None = None) -> np.ndarray:
    """Columns of `x` centred and scaled by the mean and deviation of `ref` (else of x);
    constant columns become 0."""
    ref = x if ref is None else ref
    mean, sd = ref.mean(axis=0), ref.std(axis=0)
    return (x - mean) / np.where(sd > 0, sd, 1.0)


def ridge_predict(x_fit: np.ndarray, y_fit: np.ndarray, x_new: np.ndarray) -> np.ndarray:
    """Ridge regression of `y_fit` (rows x targets) on `x_fit`, with an intercept and the
    penalty per target chosen by generalised cross-validation over ALPHAS; predictions for
    `x_new`. Inputs are standardised on the fitted rows."""
    y_mean = y_fit.mean(axis=0)
    if x_fit.shape[1] == 0:  # nothing to regress on: the mean
        return np.tile(y_mean, (len(x_new), 1))
    xs, xn = standardise(x_fit), standardise(x_new, x_fit)
    yc = y_fit - y_mean
    u, s, vt = np.linalg.svd(xs, full_matrices=False)
    uty = u.T @ yc
    n = xs.shape[0]
    best_err = np.full(yc.shape[1], np.inf)
    best_coef = np.zeros((xs.shape[1], yc.shape[1]))
    for alpha in ALPHAS:
        shrink = s / (s**2 + alpha)
        coef = vt.T @ (shrink[:, None] * uty)
        resid = yc - xs @ coef
        dof = float(np.sum(s**2 / (s**2 + alpha)))
        gcv = (resid**2).mean(axis=0) / max(1e-12, (1 - dof / n)) ** 2
        better = gcv < best_err
        best_err[better], best_coef[:, better] = gcv[better], coef[:, better]
    return xn @ best_coef + y_mean


def r2_per_column(y: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """R² of each column of `predicted` against `y` (NaN for a constant column of y)."""
    ss_res = ((y - predicted) ** 2).sum(axis=0)
    ss_tot = ((y - y.mean(axis=0)) ** 2).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ss_tot > 0, 1 - ss_res / ss_tot, np.nan)


def logistic_scores(
    x_fit: np.ndarray, y_fit: np.ndarray, x_new: np.ndarray, l2: float = 1.0
) -> np.ndarray:
    """An L2-penalised logistic regression (`l2` on the weights, not the intercept) fitted
    on 0/1 `y_fit`; the logits of `x_new`. Inputs are standardised on `x_new` and `x_fit`
    together (the attacker holds every row of its own, labelled or not)."""
    ref = np.vstack([x_fit, x_new])
    xf, xn = standardise(x_fit, ref), standardise(x_new, ref)
    y = np.asarray(y_fit, dtype=np.float64)
    d = xf.shape[1]

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        w, b = theta[:d], theta[d]
        z = xf @ w + b
        p = 1 / (1 + np.exp(-z))
        nll = float(np.sum(np.logaddexp(0, z) - y * z)) + 0.5 * l2 * float(w @ w)
        g = p - y
        return nll, np.concatenate([xf.T @ g + l2 * w, [g.sum()]])

    fit = minimize(loss, np.zeros(d + 1), jac=True, method="L-BFGS-B")
    return np.asarray(xn @ fit.x[:d] + fit.x[d])
