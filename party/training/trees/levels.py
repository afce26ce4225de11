"""One party's nodes of one round, level by level (`NodeBook`): the rows of each open
node, its histogram (through the protocol's `Histograms`) and its rows per bucket, its
candidate splits, and the children of the nodes that split.

The open nodes of a level are in the same order at every party: the roots of the round's
K trees (one per class), then for each node that split, its left child and its right
child. Of two children, the party builds the smaller one's histogram and takes the larger
one's as the parent's minus the smaller's (histogram subtraction), so a level costs about
half of its rows. The active party runs a `NodeBook` over its own columns too, in the
clear.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from vfl.party.training.trees.candidates import Candidates, Layout, candidates
from vfl.party.training.trees.columns import goes_left
from vfl.party.training.trees.histograms import Histograms, bucket_sums

Split = tuple[int, int, bool, bool]  # column, threshold, missing left, categorical


@dataclass
class Node:
    k: int  # the tree of the round (the class)
    rows: np.ndarray  # positions into the round's rows, ascending
    hist: Any  # the protocol's histogram of the node
    counts: np.ndarray  # rows per bucket
    cands: Candidates | None = None  # as offered, in the order their sums were sent


class NodeBook:
    """A party's open nodes of one round over its `codes` of the round's rows."""

    def __init__(
        self, codes: np.ndarray, layout: Layout, kernel: Histograms, key: Sequence[int]
    ) -> None:
        """`key`: seeds the shuffles of the candidates (with the level and the node), a
        secret of this party's, so its candidates' order tells no one else anything."""
        self.codes, self.layout, self.kernel, self.key = codes, layout, kernel, list(key)
        self.nodes: list[Node] = []
        self.level = 0

    def roots(self, trees: int) -> None:
        """The round's first level: every row in the root of each of its `trees` trees."""
        every = np.arange(len(self.codes))
        counts = bucket_sums(self.codes, self.layout, every)
        self.nodes = [Node(k, every, self.kernel.build(every, k), counts) for k in range(trees)]
        self.level = 0

    def offer(self) -> tuple[list[int], list[Any]]:
        """Each open node's candidates, shuffled: their number per node, and their
        left-side sums (the protocol's) node after node."""
        sizes, sums = [], []
        for i, node in enumerate(self.nodes):
            rng = np.random.default_rng([*self.key, self.level, i])
            node.cands = candidates(node.counts, self.layout).shuffled(rng)
            sizes.append(len(node.cands))
            sums.append(self.kernel.select(node.hist, node.cands))
        return sizes, sums

    def pick(self, i: int, candidate: int) -> tuple[Split, np.ndarray]:
        """Candidate `candidate` of open node `i` taken: the split, and which of the
        node's rows go left. Of the node's candidates that part its rows alike (their
        sums are the same, so which is taken would follow their shuffled order), the
        first by column and threshold is the split made: the same model whatever the
        order, run after run.

        Raises:
            IndexError: no such node or candidate (the active party's pick is wrong).
        """
        node = self.nodes[i]
        cands = node.cands
        if cands is None or not 0 <= candidate < len(cands):
            raise IndexError(f"node {i} of level {self.level} has no candidate {candidate}")
        left = self._left(node, cands, candidate)
        sizes = cands.left_sums(node.counts[:, None].astype(np.float64))[:, 0]
        for other in np.lexsort((cands.missing_left, cands.threshold, cands.column)):
            if _key(cands, other) >= _key(cands, candidate):
                break
            if sizes[other] == sizes[candidate] and np.array_equal(
                self._left(node, cands, other), left
            ):
                candidate = int(other)
                break
        return _split(cands, candidate), left

    def _left(self, node: Node, cands: Candidates, c: int) -> np.ndarray:
        column, threshold, missing_left, categorical = _split(cands, c)
        return goes_left(self.codes[node.rows, column], threshold, missing_left, categorical)

    def grow(self, lefts: Sequence[np.ndarray | None]) -> None:
        """The next level: the children of each open node `i` with `lefts[i]` (which of
        its rows go left; None: a leaf), left child first."""
        children: list[Node] = []
        for node, left in zip(self.nodes, lefts, strict=True):
            if left is not None:
                children += self._children(node, np.asarray(left, dtype=bool))
        self.nodes = children
        self.level += 1

    def _children(self, node: Node, left: np.ndarray) -> list[Node]:
        rows = (node.rows[left], node.rows[~left])
        small = 0 if len(rows[0]) <= len(rows[1]) else 1
        hist = self.kernel.build(rows[small], node.k)
        counts = bucket_sums(self.codes, self.layout, rows[small])
        built = Node(node.k, rows[small], hist, counts)
        rest = Node(
            node.k,
            rows[1 - small],
            self.kernel.subtract(node.hist, hist),
            node.counts - counts,
        )
        return [built, rest] if small == 0 else [rest, built]


def _split(cands: Candidates, c: int) -> Split:
    return (
        int(cands.column[c]),
        int(cands.threshold[c]),
        bool(cands.missing_left[c]),
        bool(cands.categorical[c]),
    )


def _key(cands: Candidates, c: int) -> tuple[int, int, bool]:
    return int(cands.column[c]), int(cands.threshold[c]), bool(cands.missing_left[c])
