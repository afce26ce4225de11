"""Feature-order inference by the active party of a tree job: the order of the rows by
each of a passive party's columns, from what the active party holds of that party's
splits (`party.training.trees.active`, `attack.trees`).

Every split of a passive party's is a cut "x <= t" on one of its columns, and cuts on one
column nest (x <= t1 lies inside x <= t2 when t1 < t2) where cuts on two columns seldom
do. The active party holds each split's decision on every validation row (the `eval`
each round, as scoring sends it) and, on the training rows, the partition of the node it
split. So it groups the splits into chains of mutually nested cuts on the validation
rows (`chains`), each chain a column whose name it does not know, its cuts ordered by
how many rows they send left (their thresholds' order), and ranks:

    validation rows   by how many cuts of the chain a row falls right of
    training rows     by the interval the chain's cuts put it in: each node of the
                      chain's splits that held the row says x <= t_j or x > t_j; the
                      row's estimate is the middle of the tightest interval (no such
                      node: the middle of the column)

Each chain is scored by Spearman's rank correlation with the column most of its splits
are on (the harness reads the splits' columns and the true values from the passive
party's view, for scoring only), the longest chain standing for its column; the score
is the mean over the columns recovered. Against a random order it is 0 within
+- max(0.02, 4 / sqrt(n - 1)).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import spearmanr
from vfl.attack.harness import AT_CHANCE, LEAKS, AttackRow
from vfl.attack.views import PartyView


def chains(cuts: np.ndarray) -> list[list[int]]:
    """Cuts (cuts x rows, True: left) grouped into chains, each cut nested in or around
    every other of its chain; widest-left first, greedily."""
    found: list[list[int]] = []
    for c in np.argsort(-cuts.sum(axis=1), kind="stable").tolist():
        for chain in found:
            if all(_nested(cuts[c], cuts[m]) for m in chain):
                chain.append(c)
                break
        else:
            found.append([c])
    return found


def _nested(a: np.ndarray, b: np.ndarray) -> bool:
    return not (a & ~b).any() or not (b & ~a).any()


Cut = tuple[np.ndarray, np.ndarray]  # a split's node's training positions, which go left


def held(active: PartyView, party: str) -> tuple[np.ndarray, list[Cut]]:
    """What the active party holds of `party`'s splits, in split-id order: their
    decisions on the validation rows (splits x rows) and their nodes' partitions of the
    training rows."""
    train = np.asarray(active.own["train_rows"])
    where = np.full(len(active.own["ids"]), -1)
    where[train] = np.arange(len(train))
    val, cuts = [], []
    for rnd in sorted(active.rounds):
        record = active.rounds[rnd]
        if f"val_{party}" in record:
            val.append(np.asarray(record[f"val_{party}"], dtype=bool))
        rows = np.asarray(record["rows"])
        bounds = np.cumsum([0, *record.get(f"cut_size_{party}", [])])
        left = np.asarray(record.get(f"cut_left_{party}", []), dtype=bool)
        at = np.asarray(record.get(f"cut_rows_{party}", []), dtype=np.int64)
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            cuts.append((where[rows[at[lo:hi]]], left[lo:hi]))
    n_val = len(np.asarray(active.own["val_rows"]))
    return (np.vstack(val) if val else np.zeros((0, n_val), dtype=bool)), cuts


def interval_ranks(order: list[int], cuts: list[Cut], rows: int) -> np.ndarray:
    """Each training row's estimate on a chain whose cuts `order` are in their
    thresholds' order: the middle of the tightest interval its nodes' cuts give it."""
    low, high = np.zeros(rows), np.full(rows, len(order) + 1.0)
    for j, c in enumerate(order, start=1):
        positions, left = cuts[c]
        low[positions[~left]] = np.maximum(low[positions[~left]], j)
        high[positions[left]] = np.minimum(high[positions[left]], j)
    return (low + high) / 2


def _mean_rho(estimates: list[tuple[int, int, np.ndarray]], truth: np.ndarray) -> tuple[float, int]:
    """(mean Spearman over the columns recovered, their number) of (column, chain length,
    estimate) triples, the longest chain of a column standing for it."""
    best: dict[int, tuple[int, float]] = {}
    for col, length, estimate in estimates:
        if col >= truth.shape[1] or np.ptp(truth[:, col]) == 0 or np.ptp(estimate) == 0:
            continue  # a categorical column (no order), or nothing to rank on these rows
        rho = float(spearmanr(estimate, truth[:, col]).statistic)
        if col not in best or length > best[col][0]:
            best[col] = (length, 0.0 if math.isnan(rho) else rho)
    if not best:
        return 0.0, 0
    return float(np.mean([rho for _, rho in best.values()])), len(best)


def order_rows(active: PartyView, passive: PartyView) -> list[AttackRow]:
    """Feature-order inference of `passive`'s columns by the active party, on the
    validation rows and on the training rows."""
    columns = np.asarray(passive.final.get("split_columns", np.zeros(0)), dtype=np.int64)
    x = passive.inputs()
    val, cuts = held(active, passive.party)
    n = min(len(columns), len(val), len(cuts))  # the splits kept (early stopping)
    varies = np.flatnonzero(val[:n].any(axis=1) & ~val[:n].all(axis=1))
    found = [[int(varies[c]) for c in chain] for chain in chains(val[varies])]
    train, val_rows = np.asarray(passive.own["train_rows"]), np.asarray(passive.own["val_rows"])
    on_val, on_train = [], []
    for chain in found:
        col = int(np.bincount(columns[chain]).argmax())
        on_val.append((col, len(chain), (~val[chain]).sum(axis=0).astype(np.float64)))
        order = sorted(chain, key=lambda c: int(val[c].sum()))
        on_train.append((col, len(chain), interval_ranks(order, cuts, len(train))))
    who = f"{active.party} (active) on {passive.party}"
    out = []
    for what, estimates, truth in (
        ("validation rows, every split's decisions", on_val, x[val_rows]),
        ("training rows, its splits' node partitions", on_train, x[train]),
    ):
        score, recovered = _mean_rho(estimates, truth)
        half = max(0.02, 4 / math.sqrt(max(1, len(truth) - 1)))
        verdict = LEAKS if score > half else AT_CHANCE
        used = (
            f"{what}: {len(varies)} splits in {len(found)} chains, {recovered} of "
            f"{x.shape[1]} columns ordered"
        )
        out.append(
            AttackRow("feature_order", who, used, score, None, -half, half, verdict, len(truth))
        )
    return out
