"""Uniform sampling from the workset table (docs/protocols.md §6).

Pick an entry uniformly at random among those that are neither too stale nor among the
W-1 most recently sampled batch ids. The authors' code draws and rejects until it hits an
eligible entry; drawing uniformly from the eligible set is the same distribution without
the loop. Too-stale entries are evicted on the way. The rejection window spreads a batch's
reuses out and interleaves them with the other cached batches, unlike FedBCD's
consecutive steps on one batch.

The sampler owns its random generator (seeded), so a run is reproducible and no global RNG
is touched.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

import numpy as np
from vfl.celu.errors import WorksetError
from vfl.celu.workset import CachedBatch, WorksetTable


class UniformSampler:
    """Draws cached batches uniformly, never repeating one within ``window`` samples.

    Args:
        table: the workset table to draw from.
        seed: seed of the sampler's own ``numpy.random.Generator``.
        window: how many most recently sampled ids to reject; defaults to W-1.

    Raises:
        WorksetError: if ``window`` is negative or ``seed`` is not an int.
    """

    def __init__(self, table: WorksetTable, seed: int, window: int | None = None) -> None:
        if window is None:
            window = table.workset - 1
        if isinstance(window, bool) or not isinstance(window, int) or window < 0:
            raise WorksetError(f"window must be an int >= 0 (W-1 by default), got {window!r}")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise WorksetError(f"seed must be an int, got {seed!r}")
        self.table = table
        self.window = window
        self._rng = np.random.default_rng(seed)
        self._recent: deque[int] = deque(maxlen=window)
        self._lock = threading.Lock()

    def sample(self, t_now: int) -> CachedBatch | None:
        """Draw one eligible entry at update counter ``t_now`` and count one use of it.

        Returns:
            The entry (a snapshot whose ``num_used`` includes this use), or None when no
            entry is eligible: the table is empty, or every entry is too stale or was among
            the last ``window`` samples.
        """
        with self._lock:
            chosen = self.table.take(t_now, self._recent, self._pick)
            if chosen is not None:
                self._recent.append(chosen.batch_id)
            return chosen

    def state_dict(self) -> dict[str, Any]:
        """The generator's state and the recent window, for a checkpoint."""
        with self._lock:
            return {"rng": self._rng.bit_generator.state, "recent": list(self._recent)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        with self._lock:
            self._rng.bit_generator.state = state["rng"]
            self._recent = deque((int(b) for b in state["recent"]), maxlen=self.window)

    def _pick(self, n: int) -> int:
        return int(self._rng.integers(n))
