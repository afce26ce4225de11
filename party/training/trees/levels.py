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
        hists = self.kernel.build_each([(every, k) for k in range(trees)])
        self.nodes = [Node(k, every, hist, counts) for k, hist in enumerate(hists)]
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

    def pick(self, i: int, ties: Sequence[int] | np.ndarray) -> tuple[Split, np.ndarray]:
        """One of candidates `ties` of open node `i` taken (they tie at the best gain):
        the split, and which of the node's rows go left. Of the tied candidates, and of
        the node's candidates that part its rows as that one does (their sums are the
        same, so which is taken would follow their shuffled order), the first by column
        and threshold is the split made: the same model whatever the order, run after
        run.

        Raises:
            IndexError: no such node or candidate (the active party's pick is wrong).
        """
        node = self.nodes[i]
        cands = node.cands
        tied = [int(c) for c in ties]
        if cands is None or not tied or any(not 0 <= c < len(cands) for c in tied):
            raise IndexError(f"node {i} of level {self.level} has no candidates {tied[:8]}")
        candidate = min(tied, key=lambda c: _key(cands, c))
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
        its rows go left; None: a leaf), left child first. Of two children the smaller's
        histogram is built (the level's at once), the larger's is the parent's minus it."""
        splits = []  # (parent, left rows, right rows, which is smaller)
        for node, left in zip(self.nodes, lefts, strict=True):
            if left is not None:
                mask = np.asarray(left, dtype=bool)
                rows = (node.rows[mask], node.rows[~mask])
                splits.append((node, rows, 0 if len(rows[0]) <= len(rows[1]) else 1))
        built = self.kernel.build_each([(rows[small], node.k) for node, rows, small in splits])
        children: list[Node] = []
        for (node, rows, small), hist in zip(splits, built, strict=True):
            counts = bucket_sums(self.codes, self.layout, rows[small])
            smaller = Node(node.k, rows[small], hist, counts)
            rest = Node(
                node.k,
                rows[1 - small],
                self.kernel.subtract(node.hist, hist),
                node.counts - counts,
            )
            children += [smaller, rest] if small == 0 else [rest, smaller]
        self.nodes = children
        self.level += 1


def _split(cands: Candidates, c: int) -> Split:
    return (
        int(cands.column[c]),
        int(cands.threshold[c]),
        bool(cands.missing_left[c]),
        bool(cands.categorical[c]),
    )


def _key(cands: Candidates, c: int) -> tuple[int, int, bool]:
    return int(cands.column[c]), int(cands.threshold[c]), bool(cands.missing_left[c])
