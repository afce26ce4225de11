"""A passive party of a tree ensemble: its bins' histograms of each open node, its
candidate splits under opaque ids, the partitions of the splits it is picked for, its
splits' decisions on the rows it is asked about. It keeps its own splits (column,
threshold) and nothing of the trees' structure or leaf values. The same object scores
with a stored model (`load_model`, `score`).
"""

from __future__ import annotations

import secrets
from typing import Any

import numpy as np
import vfl.party.training.trees.wire as wire
from vfl.party.training.context import RoleContext, ScoresInTurn
from vfl.party.training.inputs import Inputs
from vfl.party.training.trees.candidates import Layout
from vfl.party.training.trees.columns import ColumnsOf, Splits
from vfl.party.training.trees.levels import NodeBook
from vfl.party.training.trees.protocols import SIDES
from vfl.party.training.trees.wire import Peer
from vfl.secure.errors import PayloadError


class PassiveTrees(ScoresInTurn):
    def __init__(self, ctx: RoleContext) -> None:
        spec = ctx.spec.model.trees
        assert spec is not None  # the kind is trees
        self.ctx, self.spec = ctx, spec
        self.active = Peer(ctx.channel, ctx.spec.active.id, ctx.timeout)
        self.side = SIDES[ctx.spec.protocol][1](ctx)
        self._columns_of = ColumnsOf(ctx.inputs)  # the bin codes of inputs
        self.columns = self._columns_of.train
        self.splits = Splits()
        # seeds the shuffles of this party's candidates: its own secret (kept in its
        # checkpoints, so a resumed round offers them in the same order)
        self.key = [secrets.randbits(32) for _ in range(4)]
        self.importance: dict[str, Any] = {}
        self.picked: dict[int, np.ndarray] = {}  # a level's picked open nodes: rows going left

    def setup(self) -> None:
        """The protocol's keys from the active party (none under `split`)."""
        self.side.setup(self.active)

    def close(self) -> None:
        """Nothing to release."""

    def run(self) -> dict:
        ctx = self.ctx
        plan = ctx.plan
        self.layout = Layout.of(self.columns.sizes(plan.train_rows), self.columns.categorical)
        rnd = ctx.start_round + 1
        while True:
            stop, keep = self.active.read(f"{wire.round_tag(rnd)}/go", wire.read_go)
            if stop:
                break
            if rnd > self.spec.active_trees:  # (before: the active party's trees alone)
                self._round(rnd)
            ctx.reporter.round(rnd, plan.total_rounds, None, ctx.channel.stats.bytes_sent)
            if ctx.checkpoints is not None and ctx.checkpoints.due(rnd):
                ctx.checkpoints.save(rnd, self.state_dict())
            rnd += 1
        self.splits.keep_rounds(keep)
        gains = self.active.read(wire.GAINS, wire.read_gains, len(self.splits))
        self.importance = self.splits.importance(gains, self.columns.width)
        if ctx.view.recording:  # for the harness to score attacks on its columns
            ctx.view.record("final", {"split_columns": self.splits.state()["column"]})
        return {"rounds": rnd - 1, "trees": keep, "importance": self.importance}

    def _round(self, rnd: int) -> None:
        train = self.ctx.plan.train_rows
        tag = wire.round_tag(rnd)
        at, outside = np.arange(len(train)), np.zeros(0, dtype=np.int64)
        if self.spec.subsample < 1:
            at = self.active.read(f"{tag}/rows", wire.read_indices, len(train))
            outside = np.setdiff1d(np.arange(len(train)), at)
        codes = self.columns.codes[train[at]]
        kernel = self.side.histograms(codes, self.layout)
        try:
            trees = self.active.read(f"{tag}/gh", kernel.load, len(at))
            book = NodeBook(codes, self.layout, kernel, [*self.key, rnd])
            book.roots(trees)
            first = len(self.splits)
            for level in range(self.spec.depth):
                if not self._level(rnd, level, book):
                    break
            if self.ctx.view.recording:
                groups = instance_space(book, self.picked, len(at), trees)
                self.ctx.view.record(f"train/r{rnd}", {"rows": train[at], "groups": groups})
        finally:
            kernel.close()
        ids = np.arange(first, len(self.splits))
        on_train = self.splits.decide(self.columns, train[outside], ids)
        on_val = self.splits.decide(
            self._columns_of(self.ctx.val_inputs), self.ctx.plan.val_rows, ids
        )
        self.active.send(f"{tag}/eval", wire.pack_matrix(np.hstack([on_train, on_val])))

    def _level(self, rnd: int, level: int, book: NodeBook) -> bool:
        """One level: candidates out, picks in, partitions out; whether a next level
        follows (the active party's `grow`)."""
        tag = wire.level_tag(rnd, level)
        self.picked = {}
        if level >= self.spec.active_levels:
            self._offer(rnd, tag, book)
        if level + 1 == self.spec.depth:
            return False
        sizes_now = [len(node.rows) for node in book.nodes]
        lefts = self.active.read(f"{tag}/grow", wire.read_grow, sizes_now)
        if all(left is None for left in lefts):
            return False
        book.grow(lefts)
        return True

    def _offer(self, rnd: int, tag: str, book: NodeBook) -> None:
        """Its candidates of the level's open nodes out, picks in, partitions out."""
        sizes, sums = book.offer()
        self.active.send(f"{tag}/sizes", wire.indices(sizes))
        self.active.send(f"{tag}/hist", book.kernel.payload(sums))
        pick = self.active.read(f"{tag}/pick", wire.read_picks, len(book.nodes))
        picked = [i for i, ties in enumerate(pick) if len(ties)]
        if picked:
            ids, parts = [], []
            for i in picked:
                try:
                    split, left = book.pick(i, pick[i])
                except IndexError as exc:
                    raise PayloadError(
                        f"party '{self.active.peer}' sent a bad {tag}/pick: {exc}"
                    ) from None
                ids.append(self.splits.add(*split, rnd))
                parts.append(left)
                self.picked[i] = left
            self.active.send(f"{tag}/ids", wire.indices(ids))
            self.active.send(f"{tag}/part", wire.pack(parts))

    def state_dict(self) -> dict[str, Any]:
        """Its splits and its key (a checkpoint)."""
        return {
            "splits": self.splits.state(),
            "key": np.asarray(self.key, dtype=np.int64),
            "importance": dict(self.importance),
            "protocol": self.side.state(),
        }

    def load_model(self, state: dict[str, Any]) -> None:
        self.splits = Splits.from_state(state["splits"])

    def restore(self, state: dict[str, Any]) -> None:
        self.load_model(state)
        self.key = [int(v) for v in state["key"]]
        self.side.restore(state.get("protocol", {}))

    def model_part(self) -> dict[str, Any]:
        """What the model keeps: its splits and their importance (not its key)."""
        return {"splits": self.splits.state(), "importance": dict(self.importance)}

    def score(self, tag: str, inputs: Inputs, rows: np.ndarray) -> None:
        """Send every split's decision on `rows` of `inputs` (one message a request)."""
        decided = self.splits.decide(self._columns_of(inputs), rows)
        self.active.send(f"{tag}/bits", wire.pack_matrix(decided))


def instance_space(book: NodeBook, picked: dict[int, np.ndarray], rows: int, trees: int):
    """What a passive party knows of a round's trees: per row of the round and tree, the
    deepest node it knows the row is in (an id, -1: none), from the partitions it was
    sent (`grow`) and, at the last level, those of its own splits."""
    groups = np.full((rows, trees), -1, dtype=np.int64)
    count = 0
    for i, node in enumerate(book.nodes):
        left = picked.get(i)
        for part in [node.rows] if left is None else [node.rows[left], node.rows[~left]]:
            groups[part, node.k] = count
            count += 1
    return groups
