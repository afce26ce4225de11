"""Obfuscator pools a party keeps across its jobs, filled while it has nothing else to do.

Every ciphertext a party sends to a key's owner (m1, m2 and the other re-randomised
messages) takes one statistical obfuscator for the owner's key: ~1.5 ms each at 2048
bits, a third of a batch prediction's cryptography. A job need not wait for them: the
keys of a stored model are known before anyone asks it for scores. So the party daemon
owns one `PoolCache`, and every job's `PartyCrypto` takes its peers' pools from it:

- the pools outlive the job: a prediction or scoring session after training finds the
  fixed-base tables built and thousands of obfuscators ready;
- while the daemon runs no job, one thread of the cache fills each pool up to `ready`
  obfuscators, most recently used first, a few at a time (it stops within ~10 ms when a
  job starts, and pauses during online scoring until the party has been quiet for a
  second, so that it does not add to a request's latency); during a job, a pool refills
  only to its job capacity (`SecureConfig.obfuscator_pool`), and only while a job using
  it waits for a peer (its `Gate`), as a job's own pools do;
- at most `keys` keys are kept, the least recently used pool is closed first; each keeps
  up to `ready` obfuscators (512 bytes each at 2048 bits, plus ~36 MB of tables).

Security is that of the pool itself (`secure.paillier.obfuscators`): each obfuscator is
handed out once, and values computed early are as uniform as values computed late. They
live only in the daemon's memory; a restart drops them (and the daemon computes new ones).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from vfl.secure.paillier.gate import Gate
from vfl.secure.paillier.keys import PublicKey
from vfl.secure.paillier.obfuscators import ObfuscatorPool

_STEP = 4  # obfuscators per filling step: ~6 ms at 2048 bits
QUIET_S = 1.0  # the filling waits this long after the last online scoring batch


class PoolCache:
    """A party's obfuscator pools for its peers' public keys, kept across its jobs."""

    def __init__(self, keys: int = 4, ready: int = 4096) -> None:
        """`keys`: pools kept (least recently used closed first); `ready`: obfuscators
        each pool is filled up to while the party is idle."""
        self.keys, self.ready = keys, ready
        self.gate = Gate()  # the pools' own refills (to their job capacity) run while open
        self._idle = threading.Event()
        self._stop = threading.Event()
        self._quiet = threading.Condition()  # online scoring in flight, and when it last was
        self._foreground = 0
        self._last_foreground = -QUIET_S
        self._pools: OrderedDict[tuple[str, int], ObfuscatorPool] = OrderedDict()
        self._lock = threading.Lock()
        self._filler: threading.Thread | None = None

    def set_idle(self, idle: bool) -> None:
        """The party runs no job (`True`): fill the kept pools up to `ready`, and let
        their own refills run; or it runs one again (`False`): stop both at once."""
        if idle == self._idle.is_set():
            return
        if idle:
            self._idle.set()
            self.gate.open()
        else:
            self._idle.clear()
            self.gate.close()

    @contextmanager
    def foreground(self) -> Iterator[None]:
        """Mark latency-bound work outside jobs (an online scoring batch): the filling
        pauses during it and until the party has been quiet for `QUIET_S`."""
        with self._quiet:
            self._foreground += 1
        try:
            yield
        finally:
            with self._quiet:
                self._foreground -= 1
                self._last_foreground = time.monotonic()
                self._quiet.notify_all()

    def _wait_quiet(self) -> None:
        """Until no foreground work ran for `QUIET_S` (or the cache closes)."""
        with self._quiet:
            while not self._stop.is_set():
                left = self._last_foreground + QUIET_S - time.monotonic()
                if not self._foreground and left <= 0:
                    return
                self._quiet.wait(max(left, 0.05))

    def pool(self, key: PublicKey, make: Callable[[Gate], ObfuscatorPool]) -> ObfuscatorPool:
        """The kept pool for `key`, or a new one from `make(gate)`, kept (`make` raises
        what it raises, e.g. for saved table bases that do not fit `key`)."""
        name = (key.owner, int(key.n))
        with self._lock:
            pool = self._pools.get(name)
            if pool is not None:
                self._pools.move_to_end(name)
                return pool
        pool = make(self.gate)
        with self._lock:
            kept = self._pools.setdefault(name, pool)
            self._pools.move_to_end(name)
            evicted = []
            while len(self._pools) > self.keys:
                evicted.append(self._pools.popitem(last=False)[1])
            if self._filler is None and not self._stop.is_set():
                self._filler = threading.Thread(target=self._fill, name="kept-obfuscators")
                self._filler.daemon = True
                self._filler.start()
        for old in evicted if kept is pool else [pool]:
            old.close()
        return kept

    def _fill(self) -> None:
        """While the party is idle: a few obfuscators at a time into the most recently
        used pool that is not full (the gate check between steps stops it within ~10 ms)."""
        while not self._stop.is_set():
            if not self._idle.wait(timeout=0.5):
                continue
            self._wait_quiet()
            with self._lock:
                pools = list(reversed(self._pools.values()))
            if not any(pool.top_up(self.ready, _STEP) for pool in pools if self._idle.is_set()):
                self._stop.wait(0.5)  # every pool is full: look again in a while

    def ready_counts(self) -> dict[str, int]:
        """Obfuscators ready per kept key's owner (for status and tests)."""
        with self._lock:
            pools = list(self._pools.items())
        return {owner: pool.ready for (owner, _), pool in pools}

    def __len__(self) -> int:
        with self._lock:
            return len(self._pools)

    def close(self) -> None:
        """Close every kept pool (stops refills and helper processes) and the filler."""
        self._stop.set()
        self._idle.set()
        with self._quiet:
            self._quiet.notify_all()
        with self._lock:
            pools = list(self._pools.values())
            self._pools.clear()
            filler = self._filler
        if filler is not None:
            filler.join()
        for pool in pools:
            pool.close()
