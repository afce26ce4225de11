"""Obfuscator pools a party keeps across its jobs, filled while it has nothing else to do.

Every ciphertext a party sends to a key's owner (m1, m2 and the other re-randomised
messages) takes one statistical obfuscator for the owner's key: ~1.5 ms each at 2048
bits, a third of a batch prediction's cryptography. A job need not wait for them: the
keys of a stored model are known before anyone asks it for scores. So the party daemon
owns one `PoolCache`, and every job's `PartyCrypto` takes its peers' pools from it:

- the pools outlive the job: a prediction or scoring session after training finds the
  fixed-base tables built and thousands of obfuscators ready;
- a pool refills in the background while its `Gate` is open: whenever the daemon runs no
  job (the daemon holds it open then) and whenever a job using it waits for a peer;
- at most `keys` keys are kept, the least recently used pool is closed first; each keeps
  up to `ready` obfuscators (512 bytes each at 2048 bits, plus ~36 MB of tables).

Security is that of the pool itself (`secure.paillier.obfuscators`): each obfuscator is
handed out once, and values computed early are as uniform as values computed late. They
live only in the daemon's memory; a restart drops them (and the daemon computes new ones).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from gmpy2 import mpz

from secure.paillier.keys import PublicKey
from secure.paillier.obfuscators import Gate, ObfuscatorPool


class PoolCache:
    """A party's obfuscator pools for its peers' public keys, kept across its jobs."""

    def __init__(self, keys: int = 4, ready: int = 4096) -> None:
        """`keys`: pools kept (least recently used closed first); `ready`: obfuscators
        each pool keeps ready."""
        self.keys, self.ready = keys, ready
        self.gate = Gate()
        self._pools: OrderedDict[tuple[str, int], ObfuscatorPool] = OrderedDict()
        self._lock = threading.Lock()

    def pool(
        self,
        key: PublicKey,
        make: Callable[[int, Gate], ObfuscatorPool],
        bases: list[list[mpz]] | None = None,
    ) -> ObfuscatorPool:
        """The kept pool for `key`, or a new one from `make(capacity, gate)` (restored
        from the secret `bases` of an earlier table for this key, if given), kept.

        Raises:
            ConfigError: `bases` do not fit `key` (`ObfuscatorPool.restore`).
        """
        name = (key.owner, int(key.n))
        with self._lock:
            pool = self._pools.get(name)
            if pool is not None:
                self._pools.move_to_end(name)
                return pool
        pool = make(self.ready, self.gate)
        if bases is not None:
            pool.restore(bases)
        with self._lock:
            kept = self._pools.setdefault(name, pool)
            self._pools.move_to_end(name)
            evicted = []
            while len(self._pools) > self.keys:
                evicted.append(self._pools.popitem(last=False)[1])
        for old in evicted if kept is pool else [pool]:
            old.close()
        return kept

    def ready_counts(self) -> dict[str, int]:
        """Obfuscators ready per kept key's owner (for status and tests)."""
        with self._lock:
            pools = list(self._pools.items())
        return {owner: pool.ready for (owner, _), pool in pools}

    def __len__(self) -> int:
        with self._lock:
            return len(self._pools)

    def close(self) -> None:
        """Close every kept pool (stops refills and helper processes)."""
        with self._lock:
            pools = list(self._pools.values())
            self._pools.clear()
        for pool in pools:
            pool.close()
