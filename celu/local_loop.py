"""The local-update loop, generic over a party's update callback (docs/protocols.md §6-7).

A party calls `LocalUpdater.record_round` once after each communication round. The
updater then runs local updates by calling ``update_fn(batch_id, entry, t)``, where
``entry`` is a `CachedBatch` and ``t`` the party's update counter before that update.
``update_fn`` recomputes the party's own side from its rows for ``batch_id`` with the
current model and steps its optimiser; it never touches the network.

Modes:

- ``celu``: the round's statistics go into a `WorksetTable`; local updates draw from it
  with a `UniformSampler`. Schedule ``sync`` runs up to ``config.steps`` of them inside
  `record_round` (stopping early when nothing is eligible), reproducibly for a given seed.
  Schedule ``async`` runs them in one background thread between `start` and `stop`, with
  the same pacing: each `record_round` gives the worker a budget of ``config.steps``
  local updates (unused budget does not carry over), which it spends while the main loop
  waits for the network.

Why the async budget: without it a worker faster than the network does not spread its
updates over the rounds. A batch that enters an almost empty table is alone in it and
was just sampled, so the W-1 rejection window blocks it until the table refills; then
the worker burns every remaining use of all W entries at once (about W*(R-1) updates on
the same W batches, e.g. 30 at W=5, R=8), and starves again. Measured on the CELU
benchmark, those bursts made the validation AUC drop by up to 0.2 for a few rounds; with
the budget the async curve matches the sync schedule's while still overlapping the WAN.
- ``fedbcd``: `record_round` runs ``config.steps`` (Q) consecutive updates on the round's
  own batch (`fedbcd_schedule`). Unlike CELU there is no table, no interleaving of batches, no
  staleness bound and no weighting: FedBCD only ever reuses the current batch.
- ``none``, or ``celu`` with ``reuse=1``: no local updates; `record_round` only counts.

Lock protocol (``lock``, supplied by the caller, guards the party's model and optimiser):

1. The updater holds ``lock`` for exactly one local update at a time (sample, ``update_fn``,
   count), never longer, and only ever takes it from `record_round`, `run_local` and the
   worker thread.
2. The main loop holds ``lock`` around everything that reads or writes the model: the
   round's forward/backward/optimiser step, validation, checkpointing.
3. The main loop does NOT hold ``lock`` while it waits for the network (else nothing
   overlaps), nor while calling `record_round`, `run_local` or `stop` (a plain
   ``threading.Lock`` would deadlock; the default is a private ``RLock``).
4. No autograd graph may span a release of ``lock``: the worker's optimiser steps change
   parameters in place. A passive party that waits for its derivative recomputes its
   forward under the lock once the derivative arrives, then back-propagates.

A failure inside the worker is re-raised in the main thread, as `LocalUpdateWorkerError`
with the original exception as ``__cause__``, by the next call of `record_round`,
`run_local`, `check` or `stop`. It is never swallowed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from vfl.celu.config import LocalUpdateConfig
from vfl.celu.errors import LocalUpdateWorkerError
from vfl.celu.sampling import UniformSampler
from vfl.celu.workset import CachedBatch, WorksetTable

UpdateFn = Callable[[int, CachedBatch, int], None]
"""``update_fn(batch_id, entry, t)``: one local model update of a party."""


class UpdateClock:
    """Thread-safe count of a party's model updates (communication rounds + local updates)."""

    def __init__(self, start: int = 0) -> None:
        self._value = start
        self._lock = threading.Lock()

    def now(self) -> int:
        """The number of model updates so far."""
        with self._lock:
            return self._value

    def tick(self) -> int:
        """Count one model update; returns the new count."""
        with self._lock:
            self._value += 1
            return self._value


def fedbcd_schedule(batch: CachedBatch, steps: int) -> list[CachedBatch]:
    """FedBCD's local phase: the round's own batch, ``steps`` times in a row.

    The entries carry the round's statistics unchanged, with ``num_used`` 2, 3, ... so an
    ``update_fn`` written for CELU works as is.
    """
    return [replace(batch, num_used=batch.num_used + 1 + step) for step in range(steps)]


class LocalUpdater:
    """Runs a party's local updates between communication rounds.

    Args:
        config: the job's local-update settings.
        update_fn: the party's local update, see the module docstring.
        seed: seed of the sampler's generator (the same seed gives the same schedule).
        lock: the model lock of the lock protocol; a private ``RLock`` by default.
        clock: the party's update counter (pass one restored from a checkpoint to resume).
        idle_wait: seconds the worker sleeps when nothing is eligible, unless woken by a put.
    """

    def __init__(
        self,
        config: LocalUpdateConfig,
        update_fn: UpdateFn,
        *,
        seed: int,
        lock: Any = None,
        clock: UpdateClock | None = None,
        idle_wait: float = 0.05,
    ) -> None:
        self.config = config
        self.clock = clock if clock is not None else UpdateClock()
        self.table = WorksetTable(config.workset, config.reuse)
        self.sampler = UniformSampler(self.table, seed)
        self._update_fn = update_fn
        self._lock = lock if lock is not None else threading.RLock()
        self._idle_wait = idle_wait
        self._counts = {"rounds": 0, "local": 0}
        self._budget = 0  # async: local updates the worker may still run before the next round
        self._count_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._error_reported = False

    @property
    def lock(self) -> Any:
        """The model lock; hold it around the main loop's own model updates."""
        return self._lock

    def state_dict(self) -> dict[str, Any]:
        """Counts, clock, table and sampler, for a checkpoint. Call with `lock` held (the
        async worker runs one update at a time under it, so the state is consistent)."""
        with self._count_lock:
            counts = dict(self._counts)
        return {
            "counts": counts,
            "clock": self.clock.now(),
            "table": self.table.state_dict(),
            "sampler": self.sampler.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a `state_dict()` (before `start`)."""
        with self._count_lock:
            self._counts = {k: int(v) for k, v in state["counts"].items()}
        self.clock = UpdateClock(int(state["clock"]))
        self.table.load_state_dict(state["table"])
        self.sampler.load_state_dict(state["sampler"])

    @property
    def uses_worker(self) -> bool:
        """Whether local updates run in a background thread (``celu`` + ``async``)."""
        cfg = self.config
        return cfg.mode == "celu" and cfg.schedule == "async" and cfg.has_local_updates

    @property
    def num_local_updates(self) -> int:
        """Local updates run so far, in either schedule."""
        with self._count_lock:
            return self._counts["local"]

    @property
    def num_rounds(self) -> int:
        """Communication rounds recorded so far."""
        with self._count_lock:
            return self._counts["rounds"]

    def record_round(self, batch_id: int, activation: Any, derivative: Any) -> int:
        """Record one communication round's update and its statistics.

        Call it after the round's model update, without holding the lock.

        Returns:
            The number of local updates run inside this call (0 for ``async``).

        Raises:
            LocalUpdateWorkerError: if the worker failed, or ``async`` is used unstarted.
        """
        self.check()
        cfg = self.config
        if self.uses_worker and not self.is_running:
            raise LocalUpdateWorkerError(
                "schedule is async but the worker is not running; call start() first "
                "(or use the LocalUpdater as a context manager)"
            )
        t_round = self.clock.now()
        self.clock.tick()
        self._bump("rounds")
        if not cfg.has_local_updates:
            return 0
        if cfg.mode == "fedbcd":
            batch = CachedBatch(batch_id, activation, derivative, t_round, 1)
            for entry in fedbcd_schedule(batch, cfg.steps):
                with self._lock:
                    self._apply(entry)
            return cfg.steps
        if not self.uses_worker:
            self.table.put(batch_id, activation, derivative, t_round)
            return self.run_local(cfg.steps)
        with self._count_lock:  # refill before the put: the put is what wakes the worker
            self._budget = cfg.steps
        self.table.put(batch_id, activation, derivative, t_round)
        return 0

    def run_local(self, max_updates: int) -> int:
        """Run up to ``max_updates`` CELU local updates now; stops when nothing is eligible."""
        self.check()
        done = 0
        while done < max_updates and self._step():
            done += 1
        return done

    @property
    def is_running(self) -> bool:
        """Whether the background worker thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start the background worker (a no-op unless ``celu`` with ``async``)."""
        self.check()
        if not self.uses_worker or self.is_running:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run_worker, name="celu-local", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop and join the worker; re-raise its failure if not reported yet.

        Raises:
            LocalUpdateWorkerError: if the worker failed, or did not stop within ``timeout``.
        """
        self._stop.set()
        self.table.wake()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise LocalUpdateWorkerError(
                    f"local-update worker did not stop within {timeout} s; "
                    "an update_fn call is blocked (is the main loop holding the lock?)"
                )
        if self._error is not None and not self._error_reported:
            self.check()

    def check(self) -> None:
        """Raise the worker's failure, if any, in the calling thread."""
        if self._error is not None:
            self._error_reported = True
            raise LocalUpdateWorkerError(
                f"background local-update worker failed: {self._error!r}"
            ) from self._error

    def __enter__(self) -> LocalUpdater:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _step(self) -> bool:
        """One CELU local update, if an entry is eligible."""
        with self._lock:
            entry = self.sampler.sample(self.clock.now())
            if entry is None:
                return False
            self._apply(entry)
        return True

    def _apply(self, entry: CachedBatch) -> None:
        """Run ``update_fn`` on one entry and count it; the caller holds the lock."""
        self._update_fn(entry.batch_id, entry, self.clock.now())
        self.clock.tick()
        self._bump("local")

    def _bump(self, key: str, n: int = 1) -> None:
        with self._count_lock:
            self._counts[key] += n

    def _has_budget(self) -> bool:
        with self._count_lock:
            return self._budget > 0

    def _spend_budget(self) -> None:
        with self._count_lock:
            self._budget -= 1

    def _run_worker(self) -> None:
        try:
            while not self._stop.is_set():
                seen = self.table.version
                if self._has_budget() and self._step():
                    self._spend_budget()
                    time.sleep(0)  # let a waiting main loop take the lock
                else:
                    self.table.wait_for_put(seen, self._idle_wait)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread by check()
            self._error = exc
