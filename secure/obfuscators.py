"""A refillable pool of precomputed Paillier obfuscators r^n mod n^2, each used once.

Computing r^n is the expensive half of an encryption (a 2048-bit exponent mod n^2). The
pool computes them in batches with `gmpy2.powmod_base_list`, which releases the GIL, so
batches run in parallel threads and a background refill overlaps other work.

The key owner uses CRT: the n-th residues mod p^2 are exactly the subgroup of order p-1,
i.e. {s^p mod p^2}, so an obfuscator is CRT(s_p^p mod p^2, s_q^q mod q^2) for uniform
s_p, s_q: two 1024-bit exponents mod 2048-bit moduli instead of one 2048-bit exponent
mod a 4096-bit modulus (about 4x faster).
"""

from __future__ import annotations

import os
import secrets
import threading
from concurrent.futures import ThreadPoolExecutor

import gmpy2
from gmpy2 import mpz

from secure.keys import PrivateKey, PublicKey

_BATCH = 16


class ObfuscatorPool:
    """r^n mod n^2 values for one public key; `take` hands each value out exactly once."""

    def __init__(
        self,
        public_key: PublicKey,
        private_key: PrivateKey | None = None,
        capacity: int = 512,
        threads: int | None = None,
        background: bool = True,
    ) -> None:
        self._pk = public_key
        self._sk = private_key
        self._capacity = capacity
        self._background = background
        self._threads = max(1, threads or os.cpu_count() or 1)
        self._ready: list[mpz] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._filler: threading.Thread | None = None

    def take(self, count: int) -> list[mpz]:
        """`count` fresh obfuscators; those not ready are computed now (in parallel)."""
        with self._lock:
            got = self._ready[-count:] if count else []
            del self._ready[len(self._ready) - len(got) :]
        missing = count - len(got)
        if missing:
            got.extend(self.compute(missing))
        if self._background:
            self.refill_in_background()
        return got

    def compute(self, count: int) -> list[mpz]:
        """Compute `count` obfuscators, split over the configured threads."""
        if count <= 0:
            return []
        parts = min(self._threads, count)
        sizes = [count // parts + (i < count % parts) for i in range(parts)]
        if parts == 1:
            return self._batch(count)
        with ThreadPoolExecutor(parts) as executor:
            results = list(executor.map(self._batch, sizes))
        return [value for part in results for value in part]

    def fill(self) -> None:
        """Top the pool up to capacity in the calling thread."""
        while not self._stop.is_set():
            with self._lock:
                need = min(_BATCH, self._capacity - len(self._ready))
            if need <= 0:
                return
            batch = self._batch(need)
            with self._lock:
                self._ready.extend(batch)

    def refill_in_background(self) -> None:
        """Start a daemon thread that tops the pool up, unless one is running."""
        with self._lock:
            if self._filler is not None and self._filler.is_alive():
                return
            if len(self._ready) >= self._capacity or self._stop.is_set():
                return
            self._filler = threading.Thread(target=self.fill, name="obfuscators", daemon=True)
            self._filler.start()

    @property
    def ready(self) -> int:
        with self._lock:
            return len(self._ready)

    def close(self) -> None:
        """Stop the background refill (waits for the batch in flight)."""
        self._stop.set()
        filler = self._filler
        if filler is not None:
            filler.join()

    def _batch(self, count: int) -> list[mpz]:
        if self._sk is None:
            n = self._pk.n
            bases = [mpz(secrets.randbelow(int(n) - 1) + 1) for _ in range(count)]
            return gmpy2.powmod_base_list(bases, n, self._pk.nsquare)
        sk = self._sk
        sp = [mpz(secrets.randbelow(int(sk.psquare) - 1) + 1) for _ in range(count)]
        sq = [mpz(secrets.randbelow(int(sk.qsquare) - 1) + 1) for _ in range(count)]
        xp = gmpy2.powmod_base_list(sp, sk.p, sk.psquare)
        xq = gmpy2.powmod_base_list(sq, sk.q, sk.qsquare)
        # CRT: x = xp (mod p^2), x = xq (mod q^2)
        return [
            a + sk.psquare * ((b - a) * sk.psquare_inv_qsquare % sk.qsquare)
            for a, b in zip(xp, xq, strict=True)
        ]
