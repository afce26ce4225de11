"""The Paillier hot path over gmpy2 integers, for whole vectors of ciphertexts.

`phe` (python-paillier) generates keys and is the test oracle; this module does the
per-step work. Plaintexts are signed integers (fixed-point, usually packed, see
`secure.paillier.encoding`); ciphertexts are gmpy2 `mpz` in Z_{n^2}.

- encryption with g = n + 1: c = (1 + m*n) * r^n mod n^2, r^n from an `ObfuscatorPool`;
- decryption for the key owner by CRT (exponents p-1 and q-1 mod p^2 and q^2, the
  constants h_p, h_q, p^-1 mod q precomputed in `PrivateKey`, L(x) = (x-1)/p by exact
  division) with `gmpy2.powmod_base_list`, which releases the GIL: the p and q halves
  run in parallel threads (a 2-core machine decrypts even one ciphertext ~2x faster);
  with an executor that spreads them (`secure.executor`: Ray; a local one only with
  `spread_paillier`) and at least two tasks' worth of ciphertexts, blocks of
  ciphertexts go to its workers instead
  (`secure.paillier.blocks.decrypt_block`), the private key shared once per context;
- homomorphic addition of ciphertexts and of plaintexts, negation by modular inverse
  (never by exponentiating with n - |x|), re-randomisation with fresh obfuscators: those
  the pool has ready, then, with such an executor and a shortfall of two tasks' worth,
  the rest made on its workers (`rerandomize_table_block` from the pool's fixed-base
  table, shared once per context, or `rerandomize_block`'s full r^n when the pool has
  no table for workers); else the pool computes them here, as without an executor.

How many items one task gets: `BlockExecutor.block_items` (the party config's
`compute.min_task_ms` through the executor's cost model).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import gmpy2
from gmpy2 import mpz
from vfl.secure.errors import PaillierKeyError
from vfl.secure.executor.base import (
    DECRYPT,
    RERANDOMIZE_FULL,
    RERANDOMIZE_TABLE,
    BlockExecutor,
    Shared,
)
from vfl.secure.paillier.blocks import (
    WorkerTable,
    blob,
    decrypt_block,
    plaintexts,
    rerandomize_block,
    rerandomize_table_block,
    unblob,
    width_of,
)
from vfl.secure.paillier.counters import OpCounts
from vfl.secure.paillier.keys import PrivateKey, PublicKey
from vfl.secure.paillier.obfuscators import ObfuscatorPool


class Paillier:
    """Vector operations under one public key (and its private key, if we own it)."""

    def __init__(
        self,
        public_key: PublicKey,
        private_key: PrivateKey | None = None,
        pool: ObfuscatorPool | None = None,
        threads: int | None = None,
        counts: OpCounts | None = None,
        executor: BlockExecutor | None = None,
    ) -> None:
        """`counts`: where to add the encryptions, re-randomisations and decryptions done
        (None: nowhere); `executor`: where large decryptions and re-randomisations run
        (None: this process's threads and the pool)."""
        self.pk = public_key
        self.counts = counts
        self.sk = private_key
        self.threads = max(1, threads or os.cpu_count() or 1)
        self.pool = pool or ObfuscatorPool(public_key, private_key, 0, self.threads, False)
        self.executor = executor
        self._shared_key: Shared[PrivateKey] | None = None  # on the executor, once
        self._shared_public: Shared[PublicKey] | None = None  # for full r^n there
        self._shared_table: Shared[WorkerTable] | None = None  # the pool's table there

    def encrypt(self, plaintexts: Sequence[int]) -> list[mpz]:
        """Encrypt signed integers (taken mod n) with fresh obfuscators."""
        n, nsq = self.pk.n, self.pk.nsquare
        obfuscators = self.pool.take(len(plaintexts))
        if self.counts is not None:
            self.counts.add(encryptions=len(plaintexts))
        return [(1 + (m % n) * n) * r % nsq for m, r in zip(plaintexts, obfuscators, strict=True)]

    def rerandomize(self, ciphertexts: Sequence[mpz]) -> list[mpz]:
        """Multiply each ciphertext by a fresh r^n: same plaintext, fresh randomness."""
        nsq = self.pk.nsquare
        if self.counts is not None:
            self.counts.add(rerandomizations=len(ciphertexts))
        if self.executor is None or not self.executor.spreads_paillier:
            obfuscators = self.pool.take(len(ciphertexts))
            return [c * r % nsq for c, r in zip(ciphertexts, obfuscators, strict=True)]
        cts = list(ciphertexts)
        ready = self.pool.take_ready(len(cts))
        out = [c * r % nsq for c, r in zip(cts, ready, strict=False)]
        rest = cts[len(ready) :]
        op = RERANDOMIZE_TABLE if self.pool.uses_table else RERANDOMIZE_FULL
        if len(rest) >= 2 * self.executor.block_items(op, self._bits):
            out.extend(self._rerandomize_blocks(self.executor, rest))
        elif rest:
            out.extend(c * r % nsq for c, r in zip(rest, self.pool.take(len(rest)), strict=True))
        return out

    @property
    def _bits(self) -> int:
        return int(self.pk.n.bit_length())

    def _rerandomize_blocks(self, executor: BlockExecutor, cts: list[mpz]) -> list[mpz]:
        """`cts` re-randomised on the executor's workers: from the pool's table if it has
        one for workers (shared once), else by full exponentiations."""
        if self._shared_table is None:
            powers = self.pool.worker_table(len(cts))
            if powers is not None:
                self._shared_table = executor.share(WorkerTable(self.pk, powers))
        width = width_of(self.pk.nsquare)

        def blocks(op: str) -> list[bytes]:
            spans = executor.split(len(cts), executor.block_items(op, self._bits))
            return [blob(cts[lo:hi], width) for lo, hi in spans]

        if self._shared_table is not None:
            table = self._shared_table
            results = executor.map(rerandomize_table_block, table, blocks(RERANDOMIZE_TABLE))
        else:
            if self._shared_public is None:
                self._shared_public = executor.share(self.pk)
            public = self._shared_public
            results = executor.map(rerandomize_block, public, blocks(RERANDOMIZE_FULL))
        return [c for r in results for c in unblob(r, width)]

    def add(self, a: Sequence[mpz], b: Sequence[mpz]) -> list[mpz]:
        """[[x]] + [[y]] elementwise."""
        nsq = self.pk.nsquare
        return [x * y % nsq for x, y in zip(a, b, strict=True)]

    def add_plain(self, ciphertexts: Sequence[mpz], plaintexts: Sequence[int]) -> list[mpz]:
        """[[x]] + m elementwise, m a signed integer (g^m = 1 + m*n, no exponentiation)."""
        n, nsq = self.pk.n, self.pk.nsquare
        return [
            c * ((1 + (m % n) * n) % nsq) % nsq
            for c, m in zip(ciphertexts, plaintexts, strict=True)
        ]

    def negate(self, ciphertexts: Sequence[mpz]) -> list[mpz]:
        """[[-x]] by modular inverse."""
        nsq = self.pk.nsquare
        return [gmpy2.invert(c, nsq) for c in ciphertexts]

    def decrypt(self, ciphertexts: Sequence[mpz]) -> list[int]:
        """Decrypt to signed integers in (-n/2, n/2].

        Raises:
            PaillierKeyError: this context does not hold the private key.
        """
        if self.sk is None:
            raise PaillierKeyError(
                f"cannot decrypt under the key of '{self.pk.owner}': its private key is "
                "not held here"
            )
        sk, n = self.sk, self.pk.n
        if self.counts is not None:
            self.counts.add(decryptions=len(ciphertexts))
        executor = self.executor
        if (
            executor is not None
            and executor.spreads_paillier
            and len(ciphertexts) >= 2 * executor.block_items(DECRYPT, self._bits)
        ):
            return self._decrypt_blocks(executor, sk, list(ciphertexts))
        half = n // 2
        mp, mq = self._crt_powmods(sk, list(ciphertexts))
        out = []
        for xp, xq in zip(mp, mq, strict=True):
            m_p = gmpy2.divexact(xp - 1, sk.p) * sk.hp % sk.p
            m_q = gmpy2.divexact(xq - 1, sk.q) * sk.hq % sk.q
            m = m_p + sk.p * ((m_q - m_p) * sk.p_inv_q % sk.q)
            out.append(int(m - n) if m > half else int(m))
        return out

    def _decrypt_blocks(self, executor: BlockExecutor, sk: PrivateKey, cts: list[mpz]) -> list[int]:
        if self._shared_key is None:
            self._shared_key = executor.share(sk)
        width = width_of(self.pk.nsquare)
        spans = executor.split(len(cts), executor.block_items(DECRYPT, self._bits))
        blocks = [blob(cts[lo:hi], width) for lo, hi in spans]
        results = executor.map(decrypt_block, self._shared_key, blocks)
        return [m for r in results for m in plaintexts(r, self.pk.n)]

    def _crt_powmods(self, sk: PrivateKey, cts: list[mpz]) -> tuple[list[mpz], list[mpz]]:
        """([c^(p-1) mod p^2], [c^(q-1) mod q^2]): both halves at once over the threads
        (`gmpy2.powmod_base_list` releases the GIL)."""
        halves = ((sk.p - 1, sk.psquare), (sk.q - 1, sk.qsquare))
        if self.threads == 1 or not cts:
            mp, mq = (gmpy2.powmod_base_list(cts, e, m) for e, m in halves)
            return mp, mq
        parts = max(1, min(self.threads // 2, len(cts) // 8))
        step = -(-len(cts) // parts)
        jobs = [(cts[i : i + step], e, m) for e, m in halves for i in range(0, len(cts), step)]
        with ThreadPoolExecutor(min(self.threads, len(jobs))) as executor:
            results = list(executor.map(lambda job: gmpy2.powmod_base_list(*job), jobs))
        split = len(jobs) // 2
        return flatten(results[:split]), flatten(results[split:])


def flatten(parts: list[list[mpz]]) -> list[mpz]:
    return [value for part in parts for value in part]
