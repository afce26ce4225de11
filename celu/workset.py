"""The CELU-VFL workset table: recently exchanged statistics, keyed by batch id.

After every communication round a party caches what crossed the wire for that batch
(docs/protocols.md §6):

- active party: the passive activations it received and the derivative it sent;
- passive party: the activation it sent and the derivative it received;
- passive party in ``blindfl`` mode: only the encrypted derivative (``activation=None``).

The statistics are opaque to the table (tensors, arrays, ciphertext objects). Raw inputs
are never cached: a party re-reads its own rows by batch id.

Use counting. The communication-round update is an entry's first use, so an entry is
stored with ``num_used = 1`` and evicted once ``num_used`` reaches ``reuse`` (R): every
batch drives at most R model updates in total, R-1 of them local. ``reuse=1`` therefore
stores nothing and is vanilla VFL. (The authors' TF code counts R *local* uses after the
round and runs R=1 through a separate vanilla code path; counting the round keeps R=1
vanilla without a special case.)

Staleness. ``t`` is the party's own model-update counter (communication rounds plus local
updates). An entry cached at ``t0`` is evicted lazily, at the latest when it is next
considered for sampling, once ``t_now - t0 >= workset * reuse`` (W*R).

Capacity. The table holds at most W entries; inserting into a full table evicts the
oldest insertion. Re-inserting a batch id replaces its entry and makes it the newest.

All methods are thread-safe: a background worker samples while the main loop inserts.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from vfl.celu.errors import WorksetError


@dataclass(frozen=True)
class CachedBatch:
    """A snapshot of one table entry, handed to a local update.

    Attributes:
        batch_id: the batch's id (its index into the party's aligned row order).
        activation: the cached activation(s); opaque, ``None`` in blindfl passive mode.
        derivative: the cached derivative (plaintext or encrypted); opaque.
        cached_at: the party's update counter when the entry was inserted.
        num_used: uses so far including this one (2 for the first local reuse).
    """

    batch_id: int
    activation: Any
    derivative: Any
    cached_at: int
    num_used: int


@dataclass
class _Entry:
    activation: Any
    derivative: Any
    cached_at: int
    num_used: int = 1


_REASONS = ("used_up", "stale", "capacity", "replaced")


def _check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise WorksetError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


class WorksetTable:
    """Thread-safe table of at most ``workset`` cached batches, each used up to ``reuse`` times.

    Args:
        workset: W, the capacity in batches (>= 1).
        reuse: R, the total uses per batch including its communication round (>= 1).

    Raises:
        WorksetError: if W or R is not a positive int.
    """

    def __init__(self, workset: int, reuse: int) -> None:
        self.workset = _check_int("workset", workset, 1)
        self.reuse = _check_int("reuse", reuse, 1)
        self.max_staleness = workset * reuse
        self._evictions = dict.fromkeys(_REASONS, 0)
        self._entries: OrderedDict[int, _Entry] = OrderedDict()
        self._cond = threading.Condition(threading.Lock())
        self._version = 0

    def __len__(self) -> int:
        with self._cond:
            return len(self._entries)

    def __contains__(self, batch_id: object) -> bool:
        with self._cond:
            return batch_id in self._entries

    def batch_ids(self) -> list[int]:
        """The cached batch ids, oldest insertion first."""
        with self._cond:
            return list(self._entries)

    def get(self, batch_id: int) -> CachedBatch | None:
        """A snapshot of one entry without using it, or None when absent."""
        with self._cond:
            entry = self._entries.get(batch_id)
            return None if entry is None else _snapshot(batch_id, entry)

    def put(self, batch_id: int, activation: Any, derivative: Any, t: int) -> None:
        """Cache a batch's statistics after its communication round at update counter ``t``.

        Raises:
            WorksetError: if ``batch_id`` or ``t`` is not a non-negative int.
        """
        _check_int("batch_id", batch_id, 0)
        _check_int("t", t, 0)
        with self._cond:
            if self._entries.pop(batch_id, None) is not None:
                self._record("replaced")
            if self.reuse > 1:
                while len(self._entries) >= self.workset:
                    self._entries.popitem(last=False)
                    self._record("capacity")
                self._entries[batch_id] = _Entry(activation, derivative, t)
            self._version += 1
            self._cond.notify_all()

    def state_dict(self) -> dict[str, Any]:
        """The entries, oldest first, for a checkpoint (their statistics as they are)."""
        with self._cond:
            return {
                "entries": [
                    [bid, e.activation, e.derivative, e.cached_at, e.num_used]
                    for bid, e in self._entries.items()
                ],
                "evictions": dict(self._evictions),
            }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Replace the entries with those of `state_dict()`."""
        with self._cond:
            self._entries = OrderedDict(
                (int(bid), _Entry(act, der, int(t), int(used)))
                for bid, act, der, t, used in state["entries"]
            )
            self._evictions = {k: int(v) for k, v in state["evictions"].items()}
            self._version += 1

    def clear(self) -> None:
        """Drop every entry (e.g. at the end of training or on resume)."""
        with self._cond:
            self._entries.clear()

    def evict_stale(self, t_now: int) -> list[int]:
        """Evict every entry with ``t_now - cached_at >= W*R``; returns the evicted ids."""
        with self._cond:
            return self._evict_stale_locked(t_now)

    def take(
        self, t_now: int, exclude: Iterable[int], pick: Callable[[int], int]
    ) -> CachedBatch | None:
        """Atomically choose one eligible entry and count one use of it.

        Too-stale entries are evicted first. The eligible entries (not in ``exclude``) are
        ordered by batch id and ``pick(n)`` chooses an index in ``[0, n)``. The chosen entry's
        ``num_used`` grows by one and the entry is evicted when it reaches R.

        Returns:
            A snapshot of the chosen entry, or None when no entry is eligible.
        """
        excluded = set(exclude)
        with self._cond:
            self._evict_stale_locked(t_now)
            eligible = sorted(b for b in self._entries if b not in excluded)
            if not eligible:
                return None
            index = pick(len(eligible))
            if not 0 <= index < len(eligible):
                raise WorksetError(f"pick returned {index}, outside [0, {len(eligible)})")
            batch_id = eligible[index]
            entry = self._entries[batch_id]
            entry.num_used += 1
            if entry.num_used >= self.reuse:
                del self._entries[batch_id]
                self._record("used_up")
            return _snapshot(batch_id, entry)

    @property
    def version(self) -> int:
        """A counter that grows with every ``put``; pair it with `wait_for_put`."""
        with self._cond:
            return self._version

    def wait_for_put(self, seen_version: int, timeout: float) -> int:
        """Block until a put happened after ``seen_version``, `wake` is called, or timeout."""
        with self._cond:
            if self._version == seen_version:
                self._cond.wait(timeout)
            return self._version

    def wake(self) -> None:
        """Wake every thread blocked in `wait_for_put` (used to stop a worker)."""
        with self._cond:
            self._cond.notify_all()

    def _evict_stale_locked(self, t_now: int) -> list[int]:
        _check_int("t_now", t_now, 0)
        stale = [b for b, e in self._entries.items() if t_now - e.cached_at >= self.max_staleness]
        for batch_id in stale:
            del self._entries[batch_id]
            self._record("stale")
        return stale

    def evictions(self) -> dict[str, int]:
        """How many entries left the table, by reason: used_up, stale, capacity, replaced."""
        with self._cond:
            return dict(self._evictions)

    def _record(self, reason: str) -> None:
        self._evictions[reason] += 1


def _snapshot(batch_id: int, entry: _Entry) -> CachedBatch:
    return CachedBatch(
        batch_id, entry.activation, entry.derivative, entry.cached_at, entry.num_used
    )
