"""A refillable pool of Paillier obfuscators r^n mod n^2, each used once.

Two ways to compute them (`SecureConfig.obfuscator`):

- "fixed-base" (default): products of one entry per row of secret random power tables
  (`secure.paillier.fixed_base`), about 1/6 of the cost of r^n for a peer's key and 1/4 of the
  CRT cost for our own key; statistically uniform, no extra assumption. The tables cost
  about P full exponentiations to build, so a pool builds them when asked (`prepare`),
  at its first use if it is a pool for repeated use (capacity > 0), or once it has spent
  that much on full exponentiations (the ski-rental rule: never more than twice the
  better of the two choices). A pool may instead `restore` the secret bases of an
  earlier table for the same key (from the party's own checkpoint or model): its power
  tables are then rebuilt from them (at `prepare` or the first use), without any
  exponentiation.
- "full": r^n with a uniform r (2048-bit exponent mod n^2) for a peer's key; for our own
  key CRT(s_p^p mod p^2, s_q^q mod q^2), two 1024-bit exponents mod 2048-bit moduli. The
  n-th residues mod p^2 are exactly the subgroup of order p - 1, {s^p mod p^2}.

What they are: uniform n-th residues (statistical), or, for a pool of the owner's key with
`short_exponent`, h_s^a with a short uniform a (`secure.paillier.short_exponent`: an extra
assumption, for the owner's fresh encryptions for the other party only); then
"fixed-base" means fixed-base tables of h_s and "full" two CRT exponentiations.

Table products hold the GIL (gmpy2 releases it only inside big powmods), so threads
cannot share them out; `helpers` processes (`secure.paillier.obfuscator_worker`) with
copies of the table take a share of every request instead (2 cores: ~2x).

Background refill runs in one daemon thread per pool, once the pool is in use (prepared
or taken from: a pool nobody draws from costs nothing), and only while its `gate`
(`secure.paillier.gate`) is open: a refill thread that ran while the party computes
would take half of the interpreter from it. `PartyCrypto` holds the gate open only while
the party waits for a peer message; the few obfuscators in flight when the gate closes
cost ~3 ms. (The thread is not niced: a low-priority thread that holds the GIL when a
busy machine preempts it would stall the foreground for a whole scheduling round.)
"""

from __future__ import annotations

import os
import secrets
import threading

import numpy as np
from gmpy2 import mpz
from vfl.secure.config import OBFUSCATOR_METHODS as METHODS
from vfl.secure.errors import ConfigError
from vfl.secure.paillier.fixed_base import ObfuscatorTable, parallel_powmod, positions
from vfl.secure.paillier.gate import Gate
from vfl.secure.paillier.keys import PrivateKey, PublicKey
from vfl.secure.paillier.obfuscator_worker import ObfuscatorHelpers
from vfl.secure.paillier.short_exponent import (
    ShortExponentTable,
    short_exponent_powers,
    short_table_cost,
)

_BATCH = 16
_STEP = 4  # table obfuscators per background step: the gate closes within ~3 ms


class ObfuscatorPool:
    """r^n mod n^2 values for one public key; `take` hands each value out exactly once."""

    def __init__(
        self,
        public_key: PublicKey,
        private_key: PrivateKey | None = None,
        capacity: int = 512,
        threads: int | None = None,
        background: bool = True,
        method: str = "fixed-base",
        gate: Gate | None = None,
        helpers: int = 0,
        *,
        short_exponent: bool = False,
    ) -> None:
        """`gate`: background refill works only while it is set (None: always).
        `helpers`: processes that `prepare` starts to sample from copies of the table.
        `short_exponent`: h_s^a with short exponents (the owner's fresh encryptions only).

        Raises:
            ConfigError: unknown `method`, or `short_exponent` without the private key
                or without h_s.
        """
        if method not in METHODS:
            raise ConfigError(f"unknown obfuscator method {method!r}; use one of {METHODS}")
        if short_exponent and (private_key is None or public_key.h_s is None):
            raise ConfigError(
                "short-exponent obfuscators need the key owner's pool and a key with h_s; "
                "use statistical ones (short_exponent=False)"
            )
        self._short = short_exponent
        self._pk, self._sk = public_key, private_key
        self._capacity, self._background, self._method = capacity, background, method
        self._threads = max(1, threads or os.cpu_count() or 1)
        self._gate = gate
        self._ready: list[mpz] = []
        self._lock = threading.Lock()
        self._build_lock = threading.Lock()
        self._table: ObfuscatorTable | ShortExponentTable | None = None
        self._bases: list[list[mpz]] | None = None  # restored, until the table is built
        self._in_use = False  # prepared or taken from: background work may start
        self._spent = 0  # full exponentiation batches' obfuscators (ski-rental rule)
        self._stop = threading.Event()
        self._filler: threading.Thread | None = None
        self._helpers = ObfuscatorHelpers(helpers)

    @property
    def method(self) -> str:
        return self._method

    @property
    def short_exponent(self) -> bool:
        """Whether this pool makes short-exponent obfuscators h_s^a."""
        return self._short

    @property
    def uses_table(self) -> bool:
        """Whether the fixed-base tables are built (new obfuscators come from them)."""
        return self._table is not None

    @property
    def bases(self) -> list[list[mpz]] | None:
        """The secret bases of this pool's fixed-base table (one list per modulus: n^2,
        or p^2 and q^2 for the key owner), None while it has none. Secret: they may only
        be kept where the party keeps its private key."""
        table = self._table
        if isinstance(table, ShortExponentTable):
            return None  # no secret bases: its table of h_s is rebuilt in 0.1 s
        return table.bases if table is not None else self._bases

    def restore(self, bases: list[list[mpz]]) -> None:
        """Sample from the table with these secret bases (`bases` of an earlier pool for
        the same key) instead of new ones; it is built at `prepare` or the first use,
        with no exponentiation. q obfuscators from one table, over every pool that used it, are
        within q * 2^-80 of independent ones (`secure.paillier.fixed_base`).

        Raises:
            ConfigError: not a fixed-base pool, its table exists already, or the bases do
                not fit this key (count per modulus, range).
        """
        if self._method != "fixed-base" or self._table is not None:
            raise ConfigError("only a fixed-base pool without a table can restore one")
        sk = self._sk
        moduli = [self._pk.nsquare] if sk is None else [sk.psquare, sk.qsquare]
        fits = len(bases) == len(moduli) and all(
            len(row) == count and all(1 < b < m for b in row)
            for row, count, m in zip(bases, self._table_rows(), moduli, strict=False)
        )
        if not fits:
            raise ConfigError(
                f"the saved obfuscator table does not fit the key of '{self._pk.owner}'"
            )
        self._bases = [list(row) for row in bases]

    def take(self, count: int) -> list[mpz]:
        """`count` fresh obfuscators; those not ready are computed now."""
        got = self._pop_ready(count)
        missing = count - len(got)
        if missing:
            got.extend(self.compute(missing))
        self._after_take()
        return got

    def take_ready(self, count: int) -> list[mpz]:
        """Up to `count` fresh obfuscators, only those ready now (a caller with an executor
        has the rest made there, see `worker_table`)."""
        got = self._pop_ready(count)
        self._after_take()
        return got

    def _pop_ready(self, count: int) -> list[mpz]:
        self._in_use = True
        with self._lock:
            got = self._ready[-count:] if count else []
            del self._ready[len(self._ready) - len(got) :]
        return got

    def _after_take(self) -> None:
        if self._table is not None:
            self._start_helpers()
        if self._background:
            self.refill_in_background()

    def worker_table(self, count: int) -> np.ndarray | None:
        """The power table an executor's workers sample `count` obfuscators from
        (`ObfuscatorTable.powers`, built first by the rule `compute` follows), or None
        when they must make full ones instead (the "full" method, short exponents, the
        owner's CRT tables, or a table that does not pay yet; those count towards it)."""
        table = None if self._short else self._table_for(count)
        powers = table.powers() if isinstance(table, ObfuscatorTable) else None
        if powers is None:
            self._spent += count
        return powers

    def compute(self, count: int) -> list[mpz]:
        """Compute `count` obfuscators now, by table or by full exponentiation."""
        if count <= 0:
            return []
        table = self._table_for(count)
        if table is not None:
            return self._helpers.sample(table, count)
        self._spent += count
        return self._full(count, self._threads)

    def helpers_ready(self, timeout: float = 0.0) -> bool:
        """Whether every helper process is ready (waits up to `timeout` seconds each)."""
        return self._helpers.ready(timeout)

    def prepare(self) -> None:
        """Build the fixed-base tables (from restored bases, if any) and start the helper
        processes now (no-op for the "full" method, or if done)."""
        self._in_use = True
        if self._method != "fixed-base":
            return
        self._build()
        self._start_helpers()

    def _start_helpers(self) -> None:
        """Start the missing helper processes (once the table exists)."""
        if self._table is not None:
            self._helpers.start(self._pk, self._sk, self._table, self._stop)

    def _table_for(self, count: int) -> ObfuscatorTable | ShortExponentTable | None:
        if self._method != "fixed-base":
            return None
        if self._table is None and (
            self._bases is not None
            or self._capacity > 0
            or self._spent + count >= self._table_cost()
        ):
            self._build()
        return self._table

    def _table_rows(self) -> list[int]:
        """Bases per table: one table mod n^2, or one mod p^2 and one mod q^2 (owner)."""
        if self._sk is None:
            return [positions(int(self._pk.n.bit_length()))]
        return [positions(int(self._sk.p.bit_length())), positions(int(self._sk.q.bit_length()))]

    def _table_cost(self) -> int:
        """Full exponentiations a table costs to build (its number of bases, or the
        products of a short-exponent table in exponentiations)."""
        if self._short and self._sk is not None:
            return short_table_cost(self._sk)
        return sum(self._table_rows())

    def _build(self) -> ObfuscatorTable | ShortExponentTable:
        with self._build_lock:
            if self._table is None and self._short and self._sk is not None:
                self._table = ShortExponentTable(self._sk)
            elif self._table is None and self._bases is not None:
                self._table = ObfuscatorTable(self._pk, self._sk, self._bases)
            elif self._table is None:
                self._table = ObfuscatorTable.generate(self._pk, self._sk, self._threads)
            return self._table

    def fill(self) -> None:
        """Top the pool up to capacity in the calling thread (ignores the gate)."""
        while self.top_up(self._capacity, _BATCH):
            pass

    def top_up(self, target: int, count: int) -> bool:
        """Compute up to `count` more obfuscators now if fewer than `target` are ready
        (beyond the pool's capacity: a party filling its kept pools while it idles);
        whether it computed any."""
        if self._stop.is_set():
            return False
        with self._lock:
            need = min(count, target - len(self._ready))
        if need <= 0:
            return False
        batch = self.compute(need)
        with self._lock:
            self._ready.extend(batch)
        return True

    def refill_in_background(self) -> None:
        """Start a daemon thread that tops the pool up, unless one runs."""
        with self._lock:
            if self._filler is not None and self._filler.is_alive():
                return  # it tops the pool up (it clears `_filler` before it stops)
            if len(self._ready) >= self._capacity or self._stop.is_set() or not self._in_use:
                return
            self._filler = threading.Thread(target=self._refill, name="obfuscators", daemon=True)
            self._filler.start()

    def _refill(self) -> None:
        """A few obfuscators at a time (a batch of full ones), only while the gate is open."""
        while not self._stop.is_set():
            if self._gate is not None and not self._gate.wait(timeout=0.5):
                continue
            with self._lock:
                if len(self._ready) >= self._capacity:
                    self._filler = None  # under the lock: a `take` from now on starts a new one
                    return
            table = self._table if self._method == "fixed-base" else None
            batch = (
                self._helpers.sample(table, _STEP) if table is not None else self._full(_BATCH, 1)
            )
            with self._lock:
                self._ready.extend(batch)

    @property
    def ready(self) -> int:
        with self._lock:
            return len(self._ready)

    def close(self) -> None:
        """Stop the background refill (waits for the item in flight) and the helpers."""
        self._stop.set()
        filler = self._filler
        if filler is not None:
            filler.join()
        self._helpers.close()

    def _full(self, count: int, threads: int) -> list[mpz]:
        """`count` obfuscators by full exponentiation (GIL-free, over `threads`)."""
        if self._short and self._sk is not None:
            return short_exponent_powers(self._sk, count, threads)
        if self._sk is None:
            n = self._pk.n
            bases = [mpz(secrets.randbelow(int(n) - 1) + 1) for _ in range(count)]
            return parallel_powmod(bases, n, self._pk.nsquare, threads)
        sk = self._sk
        sp = [mpz(secrets.randbelow(int(sk.p) - 1) + 1) for _ in range(count)]
        sq = [mpz(secrets.randbelow(int(sk.q) - 1) + 1) for _ in range(count)]
        xp = parallel_powmod(sp, sk.p, sk.psquare, threads)
        xq = parallel_powmod(sq, sk.q, sk.qsquare, threads)
        return [sk.crt(a, b) for a, b in zip(xp, xq, strict=True)]
