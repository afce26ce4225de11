"""What a training role needs: the spec, its channel, its aligned inputs, the plan."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from vfl.celu.local_loop import LocalUpdater, UpdateFn
from vfl.contract.spec import JobSpec
from vfl.contract.states import JobState
from vfl.party.training.inputs import Inputs
from vfl.party.training.plan import Plan
from vfl.secure.channel import Channel
from vfl.secure.executor import BlockExecutor
from vfl.secure.paillier.counters import OpCounts


class Reporter(Protocol):
    """Where a party's progress goes (`party.reporting.CoordinatorReporter`). Each method
    does nothing here: a subclass reports what it needs (a scorer, nothing)."""

    def stage(self, state: JobState) -> None:
        return None

    def aligned(self, intersection_size: int, psi_seconds: float, test_size: int = 0) -> None:
        return None

    def round(
        self, rnd: int, total: int, loss: float | None, bytes_sent: int = 0, local_updates: int = 0
    ) -> None:
        return None

    def validation(self, rnd: int, metrics: dict[str, float]) -> None:
        return None

    def checkpoint(self, rnd: int) -> None:
        return None


class View(Protocol):
    """Where a party records its own view of a job, step by step (`vfl attack`,
    `party.state.views`): what it decoded from the envelopes it received, what it
    decrypted, and its own state. Each method does nothing here (a job outside `vfl
    attack`): the trainers call it unconditionally, so a recorded job runs the same code."""

    recording: bool = False  # whether anything is kept (what only a record needs is skipped)

    def record(self, name: str, arrays: dict[str, Any]) -> None:
        """Keep `arrays` (name -> array) under `name` (e.g. `train/r12`, `own`)."""
        return None

    def decrypted(self, tag: str, rows: Sequence[Sequence[int]]) -> None:
        """Keep the plaintexts this party decrypted from the envelope(s) under `tag`, one
        sequence per row of ciphertexts (or per data row, once unpacked)."""
        return None


class NoView(View):
    """A view that keeps nothing (every job but `vfl attack`'s)."""


@dataclass(frozen=True)
class Instruments:
    """What a party's job counts for its daemon's metrics (`party.metrics`)."""

    op_counts: OpCounts | None = None  # where the secure layers add their operations


@dataclass
class RoleContext:
    spec: JobSpec
    party_id: str
    channel: Channel
    inputs: Inputs  # aligned order
    plan: Plan
    reporter: Reporter
    val_inputs: Inputs  # plan.val_rows index these (held-out training rows or test rows)
    lock: threading.RLock = field(default_factory=threading.RLock)  # guards the models
    checkpoints: Checkpoints | None = None
    start_round: int = 0  # > 0: resumed after this round from a checkpoint
    instruments: Instruments = field(default_factory=Instruments)
    executor: BlockExecutor | None = None  # the party's (config `compute:`); None: local
    view: View = field(default_factory=NoView)  # `vfl attack`: this party's recorded view

    @property
    def timeout(self) -> float:
        return self.spec.train.timeout_s

    def local_updater(self, update_fn: UpdateFn) -> LocalUpdater:
        """The CELU / FedBCD local-update loop for this party (a no-op in `none` mode)."""
        return LocalUpdater(
            self.spec.local_updates, update_fn, seed=self.spec.train.seed, lock=self.lock
        )


class Checkpoints(Protocol):
    """Where a party's training state goes after the rounds its plan checkpoints."""

    def due(self, rnd: int) -> bool: ...
    def save(self, rnd: int, state: dict[str, Any]) -> None: ...


def train_rounds(
    ctx: RoleContext,
    updater: LocalUpdater,
    step: Callable[[int, np.ndarray], float | None],
    validate: Callable[[int], None],
    snapshot: Callable[[], dict[str, Any]] | None = None,
) -> dict[str, int]:
    """The communication rounds of one party from `ctx.start_round + 1` on: `step(rnd,
    rows)` per batch (reported with its loss, if it returns one, and the party's bytes sent
    and local updates so far), `validate(rnd)` when the
    plan says so, local updates around them, and after the rounds `ctx.checkpoints` says,
    a checkpoint of `snapshot()` (the trainer's state) taken with the model lock held
    (a trainer without `snapshot` is not checkpointed); returns the round counts."""
    plan = ctx.plan
    with updater:
        for rnd, _, rows in plan.batches():
            if rnd <= ctx.start_round:
                continue
            loss = step(rnd, rows)
            sent, updates = ctx.channel.stats.bytes_sent, updater.num_local_updates
            ctx.reporter.round(rnd, plan.total_rounds, loss, sent, updates)
            if plan.validates_at(rnd):
                validate(rnd)
            if snapshot is not None and ctx.checkpoints is not None and ctx.checkpoints.due(rnd):
                with ctx.lock:
                    state = snapshot()
                ctx.checkpoints.save(rnd, state)
    return {"rounds": plan.total_rounds, "local_updates": updater.num_local_updates}


class ScoresInTurn:
    """A scoring role's `score_batches`: `score` of each (tag, rows) in turn, its outputs
    as they come (scores at the active party, None at a passive one)."""

    def score(self, tag: str, inputs: Inputs, rows: np.ndarray) -> np.ndarray | None:
        raise NotImplementedError

    def score_batches(
        self, inputs: Inputs, batches: Sequence[tuple[str, np.ndarray]]
    ) -> Iterator[Any]:
        for tag, rows in batches:
            yield self.score(tag, inputs, rows)
