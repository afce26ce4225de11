"""One round's trees at the active party (`Growth`): the gain of every candidate of every
party at each open node, the best split, leaf values.

XGBoost's second-order formulas over a node's sums G, H (and a candidate's left-side
G_L, H_L; right: G - G_L, H - H_L), with l2 = lambda:

    gain  = G_L^2 / (H_L + l2) + G_R^2 / (H_R + l2) - G^2 / (H + l2)
    leaf  = -learning_rate * G / (H + l2)

A candidate is valid when both sides hold at least `min_child_weight` of hessian; a node
splits on its valid candidate of largest gain if that gain is positive. Ties between
owners go to the first in the order offered: the active party's own, then each passive
party's in the spec's order; ties within an owner's candidates (exact, as encrypted sums
are: equal sums, equal gains) go to its first by column and threshold, which the owner
alone knows (`Choice.ties`, `NodeBook.pick`), so the trees do not depend on the order
a party shuffled its candidates in. Gains never leave the active party (but as
importance, at the end).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from vfl.contract.spec import TreesSpec
from vfl.party.training.trees.forest import Tree

MIN_GAIN = 1e-12  # below it a "gain" is rounding, not signal


@dataclass(frozen=True)
class Choice:
    """The split of an open node: whose candidate (owner), which, and its gain."""

    owner: int
    candidate: int
    gain: float
    ties: tuple[int, ...] = ()  # the owner's candidates of the same gain, `candidate` first


@dataclass
class Open:
    k: int  # the tree
    node: int  # its node id in the tree
    rows: np.ndarray  # positions into the round's rows


class Growth:
    """The K trees of one round, grown level by level over the round's (g, h)."""

    def __init__(self, gh: np.ndarray, spec: TreesSpec) -> None:
        self.gh, self.spec = gh, spec
        k = gh.shape[1] // 2
        self.trees = [Tree() for _ in range(k)]
        every = np.arange(len(gh))
        self.open = [Open(t, 0, every) for t in range(k)]
        self.leaf_of = np.zeros((len(gh), k), dtype=np.int64)  # each row's node, per tree
        for item in self.open:
            self._set_value(item)

    def totals(self, item: Open) -> tuple[float, float]:
        sums = self.gh[item.rows, 2 * item.k : 2 * item.k + 2].sum(axis=0)
        return float(sums[0]), float(sums[1])

    def choose(self, offers: Sequence[Sequence[np.ndarray]]) -> list[Choice | None]:
        """The split of each open node from every owner's candidate sums (`offers[o][i]`:
        owner o's, candidates x 2, at open node i); None: it stays a leaf."""
        choices: list[Choice | None] = []
        for i, item in enumerate(self.open):
            g, h = self.totals(item)
            best: Choice | None = None
            for owner, sums in enumerate(offers):
                gain, ties = best_candidate(g, h, sums[i], self.spec.l2, self.spec.min_child_weight)
                if len(ties) and gain > MIN_GAIN and (best is None or gain > best.gain):
                    best = Choice(owner, int(ties[0]), gain, tuple(int(t) for t in ties))
            choices.append(best)
        return choices

    def divide(
        self,
        choices: Sequence[Choice | None],
        ids: Sequence[int],
        lefts: Sequence[np.ndarray | None],
    ) -> None:
        """Split each open node with a choice: its owner's split id `ids[i]`, its rows
        going left `lefts[i]`; their children are the next level's open nodes."""
        following: list[Open] = []
        for item, choice, sid, left in zip(self.open, choices, ids, lefts, strict=True):
            if choice is None or left is None:
                continue
            tree = self.trees[item.k]
            kids = tree.divide(item.node, choice.owner, sid, choice.gain)
            for kid, rows in zip(kids, (item.rows[left], item.rows[~left]), strict=True):
                child = Open(item.k, kid, rows)
                self.leaf_of[rows, item.k] = kid
                self._set_value(child)
                following.append(child)
        self.open = following

    def _set_value(self, item: Open) -> None:
        g, h = self.totals(item)
        value = -self.spec.learning_rate * g / (h + self.spec.l2) if h + self.spec.l2 > 0 else 0.0
        self.trees[item.k].value[item.node] = value

    def outputs(self) -> np.ndarray:
        """rows x K: each of the round's rows' leaf value in each tree."""
        out = np.empty(self.leaf_of.shape)
        for k, tree in enumerate(self.trees):
            out[:, k] = np.asarray(tree.value)[self.leaf_of[:, k]]
        return out


def best_candidate(
    g: float, h: float, sums: np.ndarray, l2: float, min_child_weight: float
) -> tuple[float, np.ndarray]:
    """(the largest gain, the candidates that have it) among the valid ones of a node
    with sums (g, h) and candidates' left-side `sums`; (-inf, none) when none is valid."""
    none = np.zeros(0, dtype=np.int64)
    if not len(sums):
        return float("-inf"), none
    gl, hl = sums[:, 0], sums[:, 1]
    gr, hr = g - gl, h - hl
    valid = (hl >= min_child_weight) & (hr >= min_child_weight) & (hl + l2 > 0) & (hr + l2 > 0)
    if not valid.any():
        return float("-inf"), none
    with np.errstate(divide="ignore", invalid="ignore"):
        gains = gl**2 / (hl + l2) + gr**2 / (hr + l2) - g**2 / (h + l2)
    gains = np.where(valid, gains, -np.inf)
    best = float(np.max(gains))
    return best, np.flatnonzero(gains == best)
