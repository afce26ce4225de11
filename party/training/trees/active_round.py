"""One round at the active party: its (g, h) to every passive party, then level by level
each open node's candidates from every party, the best splits, the partitions, and what
every passive party needs to know of them (docs/protocols.md, "Gradient-boosted trees";
the messages: `party.training.trees.wire`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import vfl.party.training.trees.wire as wire
from vfl.contract.spec import TreesSpec
from vfl.party.training.trees.columns import Splits
from vfl.party.training.trees.grower import Choice, Growth
from vfl.party.training.trees.histograms import Gradients
from vfl.party.training.trees.levels import NodeBook
from vfl.party.training.trees.wire import Peer


class ActiveRound:
    """Round `rnd`'s trees over the round's (g, h), with the active party's own columns
    (`own`, its `NodeBook` over the same (g, h) in the clear, and its `splits`) and
    every passive party (`peers`, each
    with its side of the exchange and its count of splits so far, `counts`)."""

    def __init__(
        self,
        rnd: int,
        spec: TreesSpec,
        own: NodeBook,
        splits: Splits,
        peers: Sequence[tuple[Peer, Gradients]],
        counts: list[int],
    ) -> None:
        self.rnd, self.spec, self.own, self.splits = rnd, spec, own, splits
        self.peers, self.counts = peers, counts
        self.first = [len(splits), *counts]  # each owner's first split id of the round
        # per passive party, each split of its picked this round: (level, the node's
        # rows, which go left), what this party learns of that party's columns
        self.cuts: list[list[tuple[int, np.ndarray, np.ndarray]]] = [[] for _ in peers]

    def run(self, gh: np.ndarray, rows: np.ndarray | None) -> Growth:
        """Grow the round's trees; `rows`: the round's rows among the training rows, sent
        when a subsample (None: all of them)."""
        tag = wire.round_tag(self.rnd)
        for peer, exchange in self.peers:
            if rows is not None:
                peer.send(f"{tag}/rows", wire.indices(rows))
            peer.send(f"{tag}/gh", exchange.payload(gh))
        growth = Growth(gh, self.spec)
        self.own.roots(len(growth.trees))
        for level in range(self.spec.depth):
            choices = growth.choose(self._offers(level, [item.k for item in growth.open]))
            ids, lefts = self._partitions(level, choices, growth)
            last = level + 1 == self.spec.depth
            if not last:
                for peer, _ in self.peers:
                    peer.send(f"{wire.level_tag(self.rnd, level)}/grow", wire.grow(lefts))
            growth.divide(choices, ids, lefts)
            if last or not growth.open:
                break
            self.own.grow(lefts)
        return growth

    def _offers(self, level: int, trees: list[int]) -> list[list[np.ndarray]]:
        """Every owner's candidate sums per open node (of tree `trees[i]`): the active
        party's own, then each passive party's."""
        _, own = self.own.offer()
        offers = [list(own)]
        tag = wire.level_tag(self.rnd, level)
        if level < self.spec.active_levels:  # the active party's columns alone
            return offers + [[np.zeros((0, 2))] * len(trees) for _ in self.peers]
        for peer, exchange in self.peers:
            sizes = peer.read(f"{tag}/sizes", wire.read_sizes, len(trees))
            counts = [int(s) for s in sizes]
            offers.append(peer.read(f"{tag}/hist", exchange.sums, counts, trees))
        return offers

    def _partitions(
        self, level: int, choices: Sequence[Choice | None], growth: Growth
    ) -> tuple[list[int], list[np.ndarray | None]]:
        """Each chosen split's id at its owner and which of its node's rows go left: the
        active party's from its own book; each passive party told its picks (`pick`) and
        answering with their ids and partitions."""
        n = len(choices)
        ids: list[int] = [-1] * n
        lefts: list[np.ndarray | None] = [None] * n
        tag = wire.level_tag(self.rnd, level)
        offered = level >= self.spec.active_levels
        for owner, (peer, _) in enumerate(self.peers if offered else [], start=1):
            ties = [c.ties if c and c.owner == owner else () for c in choices]
            peer.send(f"{tag}/pick", wire.picks(ties))
            picked = np.flatnonzero([len(t) > 0 for t in ties])
            if not len(picked):
                continue
            got = peer.read(f"{tag}/ids", wire.read_split_ids, self.counts[owner - 1], len(picked))
            sizes = [len(growth.open[i].rows) for i in picked]
            parts = peer.read(f"{tag}/part", wire.unpack, sizes)
            for i, sid, part in zip(picked.tolist(), got, parts, strict=True):
                ids[i], lefts[i] = int(sid), part
                self.cuts[owner - 1].append((level, growth.open[i].rows, part))
            self.counts[owner - 1] += len(picked)
        for n, choice in enumerate(choices):
            if choice is not None and choice.owner == 0:
                split, left = self.own.pick(n, choice.ties)
                ids[n], lefts[n] = self.splits.add(*split, self.rnd), left
        return ids, lefts
