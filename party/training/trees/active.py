"""The active party of a tree ensemble: labels, (g, h), gains, the trees' structure and
leaf values, its own splits; validation, early stopping, checkpoints after every round.
The same object scores with a stored model (`load_model`, `score`).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import vfl.party.training.trees.wire as wire
from vfl.party.training.context import RoleContext, ScoresInTurn
from vfl.party.training.inputs import Inputs
from vfl.party.training.task import Labels, Task
from vfl.party.training.trees.active_round import ActiveRound
from vfl.party.training.trees.candidates import Layout
from vfl.party.training.trees.columns import ColumnsOf, Splits
from vfl.party.training.trees.forest import Decisions, Forest
from vfl.party.training.trees.histograms import PlainHistograms
from vfl.party.training.trees.levels import NodeBook
from vfl.party.training.trees.objective import Objective
from vfl.party.training.trees.protocols import SIDES
from vfl.party.training.trees.wire import Peer

IMPROVEMENT = 1e-12  # a validation loss lower by less is no better


class ActiveTrees(ScoresInTurn):
    def __init__(self, ctx: RoleContext, labels: Labels, task: Task) -> None:
        spec = ctx.spec.model.trees
        assert spec is not None  # the kind is trees
        self.ctx, self.spec, self.task = ctx, spec, task
        self.objective = Objective(task)
        self.side = SIDES[ctx.spec.protocol][0](ctx, task.kind, task.out_dim)
        self.peers = [Peer(ctx.channel, p.id, ctx.timeout) for p in ctx.spec.passives]
        self._columns_of = ColumnsOf(ctx.inputs)  # the bin codes of inputs
        self.columns = self._columns_of.train
        self.y = self.y_val = self.val_target = None
        if labels.train is not None and labels.val is not None:
            self.y = labels.of(ctx.plan.train_rows).numpy().astype(np.float64)
            self.val_target = labels.of(ctx.plan.val_rows, validation=True)
            self.y_val = self.val_target.numpy().astype(np.float64)
        start = np.zeros(task.out_dim) if self.y is None else self.objective.start(self.y)
        self.forest = Forest(start)
        self.splits = Splits()
        self.per_round: list[list[int]] = []  # each round's splits of each passive party
        training = self.y is not None  # (a scorer holds no margins)
        self.margins = np.tile(start, (len(ctx.plan.train_rows) if training else 0, 1))
        self.val_margins = np.tile(start, (len(ctx.plan.val_rows) if training else 0, 1))
        self.best_round, self.best_loss = 0, float("inf")
        self.best_outputs = self.val_margins.copy()
        self.metrics: dict[str, float] = {}
        self.history: list[dict] = []
        self.importance: dict[str, Any] = {}
        self.started = time.monotonic()
        self.val_seconds = 0.0

    def setup(self) -> None:
        """The protocol's keys to every passive party (none under `split`)."""
        self.side.setup(self.peers)

    def close(self) -> None:
        """Nothing to release."""

    @property
    def counts(self) -> list[int]:
        """Each passive party's splits so far."""
        return [sum(r[o] for r in self.per_round) for o in range(len(self.peers))]

    def run(self) -> dict:
        ctx = self.ctx
        self.layout = Layout.of(self.columns.sizes(ctx.plan.train_rows), self.columns.categorical)
        rnd = ctx.start_round + 1
        while True:
            stop, keep = self._stopping(rnd)
            for peer in self.peers:
                peer.send(f"{wire.round_tag(rnd)}/go", wire.go(stop, keep))
            if stop:
                break
            loss = self._round(rnd)
            ctx.reporter.round(rnd, ctx.plan.total_rounds, loss, ctx.channel.stats.bytes_sent)
            self._validate(rnd)
            if ctx.checkpoints is not None and ctx.checkpoints.due(rnd):
                ctx.checkpoints.save(rnd, self.state_dict())
            rnd += 1
        self._finish(keep)
        return {
            "rounds": rnd - 1,
            "trees": keep,
            "metrics": self.metrics,
            "history": self.history,
            "validation_outputs": self._kept_outputs(keep).astype(np.float32),
            "importance": self.importance,
        }

    def _kept_outputs(self, keep: int) -> np.ndarray:
        """The validation rows' margins of the rounds kept: the last validation's, or the
        best one's when early stopping kept fewer rounds than it trained."""
        if self.history and keep < self.history[-1]["round"]:
            return self.best_outputs
        return self.val_margins

    def _stopping(self, rnd: int) -> tuple[bool, int]:
        """Whether training ends before round `rnd`, and the rounds the model keeps."""
        patience = self.spec.early_stopping
        if patience is not None and rnd - 1 - self.best_round >= patience:
            return True, self.best_round
        if rnd > self.spec.count:
            return True, self.best_round if patience is not None else rnd - 1
        return False, 0

    def _round(self, rnd: int) -> float:
        """Grow round `rnd`'s trees and add them to every row's margins; the training
        loss after it."""
        assert self.y is not None
        train = self.ctx.plan.train_rows
        chosen = self._subsample(rnd, len(train))
        at = np.arange(len(train)) if chosen is None else chosen
        gh = self.objective.gradients(self.margins[at], self.y[at])
        codes = self.columns.codes[train[at]]
        kernel = PlainHistograms(codes, self.layout)
        kernel.load_array(gh)
        own = NodeBook(codes, self.layout, kernel, [self.ctx.spec.train.seed, rnd])
        before, own_first = self.counts, len(self.splits)
        after = list(before)
        gradients = self.side.gradients()
        alone = rnd <= self.spec.active_trees  # the passive parties take no part
        peers = [] if alone else [(peer, gradients) for peer in self.peers]
        grower = ActiveRound(rnd, self.spec, own, self.splits, peers, after)
        growth = grower.run(gh, chosen)
        self.per_round.append([a - b for a, b in zip(after, before, strict=True)])
        self.forest.rounds.append(growth.trees)
        self.margins[at] += growth.outputs()
        on_val = self._elsewhere(rnd, _outside(chosen, len(train)), own_first)
        self._record(rnd, train[at], grower, on_val)
        return self.objective.loss(self.margins, self.y)

    def _record(
        self, rnd: int, rows: np.ndarray, grower: ActiveRound, on_val: list[np.ndarray]
    ) -> None:
        """Its view of round `rnd` (`vfl attack`): the round's rows (`rows`, aligned) and,
        per passive party p, the row partitions of p's splits it picked (`cut_*_<p>`:
        each split's level, its node's rows as positions into `rows` and which go left,
        end to end) and those splits' decisions on the validation rows (`val_<p>`)."""
        if not self.ctx.view.recording:
            return
        seen: dict[str, np.ndarray] = {"rows": rows}
        for peer, cuts in zip(self.peers, grower.cuts, strict=False):
            p = peer.peer
            seen[f"cut_level_{p}"] = np.array([c[0] for c in cuts], dtype=np.int64)
            seen[f"cut_size_{p}"] = np.array([len(c[1]) for c in cuts], dtype=np.int64)
            seen[f"cut_rows_{p}"] = np.concatenate([np.zeros(0, np.int64), *(c[1] for c in cuts)])
            seen[f"cut_left_{p}"] = np.concatenate([np.zeros(0, bool), *(c[2] for c in cuts)])
        for peer, bits in zip(self.peers, on_val, strict=False):
            seen[f"val_{peer.peer}"] = bits
        self.ctx.view.record(f"train/r{rnd}", seen)

    def _subsample(self, rnd: int, rows: int) -> np.ndarray | None:
        """The round's rows among the training rows (None: all of them)."""
        if self.spec.subsample >= 1:
            return None
        rng = np.random.default_rng([self.ctx.spec.train.seed, 2, rnd])
        size = max(1, int(round(self.spec.subsample * rows)))
        return np.sort(rng.choice(rows, size=size, replace=False))

    def _elsewhere(self, rnd: int, outside: np.ndarray, first: int) -> list[np.ndarray]:
        """Round `rnd`'s trees on the training rows `outside` its rows and on the
        validation rows: every party's decisions at its splits of the round (its own from
        split id `first` on; the passive parties' in their `eval`). Returns each passive
        party's decisions on the validation rows (splits x rows; none in a round it took
        no part in)."""
        ctx, r = self.ctx, rnd - 1
        train_rows, val_rows = ctx.plan.train_rows[outside], ctx.plan.val_rows
        ids = np.arange(first, len(self.splits))
        val_columns = self._columns_of(ctx.val_inputs)
        on_train, on_val = Decisions(), Decisions()
        on_train.add(0, self.splits.decide(self.columns, train_rows, ids), first)
        on_val.add(0, self.splits.decide(val_columns, val_rows, ids), first)
        counts, seen = self.counts, []
        for owner, peer in enumerate(self.peers if rnd > self.spec.active_trees else [], 1):
            made = self.per_round[r][owner - 1]
            both = peer.read(
                f"{wire.round_tag(rnd)}/eval",
                wire.unpack_matrix,
                made,
                len(train_rows) + len(val_rows),
            )
            first_p = counts[owner - 1] - made
            on_train.add(owner, both[:, : len(train_rows)], first_p)
            on_val.add(owner, both[:, len(train_rows) :], first_p)
            seen.append(both[:, len(train_rows) :])
        rounds = range(r, r + 1)
        self.margins[outside] += self.forest.margins(on_train, len(train_rows), rounds)
        self.val_margins += self.forest.margins(on_val, len(val_rows), rounds)
        return seen

    def _validate(self, rnd: int) -> None:
        assert self.y_val is not None and self.val_target is not None
        begun = time.monotonic()
        self.metrics = self.task.evaluate(self.val_margins, self.val_target)
        loss = self.objective.loss(self.val_margins, self.y_val)
        if loss < self.best_loss - IMPROVEMENT or self.best_round == 0:
            self.best_round, self.best_loss = rnd, loss
            self.best_outputs = self.val_margins.copy()
        now = time.monotonic()
        self.history.append(
            {
                "round": rnd,
                "seconds": round(now - self.started, 3),
                "train_seconds": round(begun - self.started - self.val_seconds, 3),
                **self.metrics,
            }
        )
        self.val_seconds += now - begun
        self.ctx.reporter.validation(rnd, self.metrics)

    def _finish(self, keep: int) -> None:
        """Keep the first `keep` rounds; tell each passive party its kept splits' gains;
        the importance of what this party sees: its own columns, each passive party's
        total."""
        if keep < len(self.forest.rounds):
            self.forest.rounds = self.forest.rounds[:keep]
            self.per_round = self.per_round[:keep]
            self.splits.keep_rounds(keep)
            self.metrics = {
                k: v for k, v in self.history[keep - 1].items() if k not in _POINT_FIELDS
            }
        owners = [np.zeros(len(self.splits))] + [np.zeros(c) for c in self.counts]
        for trees in self.forest.rounds:
            for tree in trees:
                for owner, split, gain in tree.splits():
                    owners[owner][split] += gain
        for peer, gains in zip(self.peers, owners[1:], strict=True):
            peer.send(wire.GAINS, wire.gains(gains))
        own = self.splits.importance(owners[0], self.columns.width)
        self.importance = {
            "own": own,
            "parties": {
                peer.peer: {"gain": float(g.sum()), "splits": len(g)}
                for peer, g in zip(self.peers, owners[1:], strict=True)
            },
        }

    def state_dict(self) -> dict[str, Any]:
        """The trees, own splits, margins and validations so far (a checkpoint)."""
        return {
            "forest": self.forest.state(),
            "splits": self.splits.state(),
            "per_round": np.asarray(self.per_round, dtype=np.int64).reshape(-1, len(self.peers)),
            "margins": self.margins,
            "val_margins": self.val_margins,
            "best": [self.best_round, self.best_loss],
            "best_outputs": self.best_outputs,
            "metrics": dict(self.metrics),
            "history": list(self.history),
            "importance": dict(self.importance),
            "protocol": self.side.state(),
        }

    def load_model(self, state: dict[str, Any]) -> None:
        """Load the trees and splits of a `state_dict()` (to score with them)."""
        self.forest = Forest.from_state(state["forest"])
        self.splits = Splits.from_state(state["splits"])
        self.per_round = [[int(v) for v in row] for row in state["per_round"]]

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from a `state_dict()` (instead of `setup()`)."""
        self.load_model(state)
        self.side.restore(state.get("protocol", {}))
        self.margins = np.asarray(state["margins"], dtype=np.float64)
        self.val_margins = np.asarray(state["val_margins"], dtype=np.float64)
        self.best_round, self.best_loss = int(state["best"][0]), float(state["best"][1])
        self.best_outputs = np.asarray(state["best_outputs"], dtype=np.float64)
        self.metrics, self.history = dict(state["metrics"]), list(state["history"])

    def model_part(self) -> dict[str, Any]:
        """What the model keeps: trees, own splits, the passive parties' split counts,
        and the importance this party sees."""
        state = self.state_dict()
        return {k: state[k] for k in ("forest", "splits", "per_round", "importance")}

    def score(self, tag: str, inputs: Inputs, rows: np.ndarray) -> np.ndarray:
        """The model's margins for `rows` of `inputs`, with every passive party's
        decisions at its splits (`<tag>/bits`)."""
        decisions = Decisions()
        decisions.add(0, self.splits.decide(self._columns_of(inputs), rows))
        for owner, (peer, count) in enumerate(zip(self.peers, self.counts, strict=True), 1):
            bits = peer.read(f"{tag}/bits", wire.unpack_matrix, count, len(rows))
            decisions.add(owner, bits)
        return self.forest.margins(decisions, len(rows)).astype(np.float32)


_POINT_FIELDS = ("round", "seconds", "train_seconds")


def _outside(chosen: np.ndarray | None, rows: int) -> np.ndarray:
    """The training rows (of `rows`) a round did not grow on (none without a subsample)."""
    if chosen is None:
        return np.zeros(0, dtype=np.int64)
    kept = np.ones(rows, dtype=bool)
    kept[chosen] = False
    return np.flatnonzero(kept)
