"""A helper process that samples obfuscators from a copy of a pool's fixed-base table.

Table products hold the GIL, so threads cannot spread them over cores; a helper process
can. The pool sends its secret table bases once (never anything from a peer; for a
short-exponent table, only the key and its factors, since h_s is the table's base), the
helper rebuilds the power tables (255 P products, no exponentiation), reports that it is ready
(until then the pool works alone), and answers requests for k obfuscators with one
fixed-width big-endian blob. Samples from a copy of the table
have the distribution of the pool's own (fresh uniform digits, same secret bases), so
the pool may split any request between itself and its helpers.

The helper is a daemon "spawn" process owned by its `ObfuscatorWorker` and stopped by
`close()` (or when the object is garbage collected, or when its parent dies, even by
SIGKILL: `secure.executor.lifeline`): a script that uses helpers needs
the usual `if __name__ == "__main__":` guard. A pool's helpers, together, are its
`ObfuscatorHelpers`: they start once the pool has its table, and a pool whose helper
dies, or whose helpers cannot start, carries on alone.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
import weakref
from multiprocessing.connection import Connection

from gmpy2 import mpz
from vfl.secure.executor.lifeline import watch_parent
from vfl.secure.paillier.fixed_base import ObfuscatorTable
from vfl.secure.paillier.keys import PrivateKey, PublicKey
from vfl.secure.paillier.short_exponent import ShortExponentTable

_READY = b"ready"
log = logging.getLogger(__name__)


class ObfuscatorWorker:
    """One helper process with a copy of `table` for `public_key` (and `private_key`)."""

    def __init__(
        self,
        public_key: PublicKey,
        private_key: PrivateKey | None,
        table: ObfuscatorTable | ShortExponentTable,
    ) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        factors = None if private_key is None else (int(private_key.p), int(private_key.q))
        h_s = None if public_key.h_s is None else int(public_key.h_s)
        if isinstance(table, ObfuscatorTable):
            bases: list[list[int]] | None = [[int(b) for b in row] for row in table.bases]
        else:
            bases = None  # a short-exponent table: rebuilt from h_s
        self._process = context.Process(
            target=_serve,
            args=(child, (int(public_key.n), h_s), factors, bases, os.getpid()),
            name="obfuscator-helper",
            daemon=True,
        )
        self._process.start()
        child.close()
        self._width = (int(public_key.nsquare.bit_length()) + 7) // 8
        self._ready = False
        self._finalizer = weakref.finalize(self, _stop, self._conn, self._process)

    def ready(self, timeout: float = 0.0) -> bool:
        """Whether the helper has built its table (waits up to `timeout` seconds).

        Raises:
            EOFError: the helper process died.
        """
        if not self._ready and self._conn.poll(timeout):
            self._ready = self._conn.recv_bytes() == _READY
        return self._ready

    def request(self, count: int) -> None:
        """Ask for `count` obfuscators; collect them with `receive`."""
        self._conn.send(count)

    def receive(self) -> list[mpz]:
        """The obfuscators of the last request.

        Raises:
            EOFError: the helper process died.
        """
        blob = self._conn.recv_bytes()
        width = self._width
        return [mpz.from_bytes(blob[i : i + width], "big") for i in range(0, len(blob), width)]

    def close(self) -> None:
        """Stop the helper process."""
        self._finalizer()


class ObfuscatorHelpers:
    """The helper processes of one pool, which split each request with the pool."""

    def __init__(self, count: int) -> None:
        """`count`: processes to start (fewer once one cannot start; none once one dies)."""
        self.count = count
        self.workers: list[ObfuscatorWorker] = []
        self._lock = threading.Lock()

    def start(
        self,
        public_key: PublicKey,
        private_key: PrivateKey | None,
        table: ObfuscatorTable | ShortExponentTable,
        stop: threading.Event,
    ) -> None:
        """Start the missing helper processes with copies of `table` (none once `stop`
        is set)."""
        if len(self.workers) >= self.count or stop.is_set():
            return
        with self._lock:
            try:
                while len(self.workers) < self.count and not stop.is_set():
                    self.workers.append(ObfuscatorWorker(public_key, private_key, table))
            except (AssertionError, OSError) as exc:  # e.g. inside a daemonic process
                log.warning("no obfuscator helper processes (%s); the pool works alone", exc)
                self.count = len(self.workers)

    def sample(self, table: ObfuscatorTable | ShortExponentTable, count: int) -> list[mpz]:
        """`count` obfuscators from `table`, shared with the ready helpers unless another
        thread uses them (the caller computes its share meanwhile)."""
        if not self.workers or count < 2 or not self._lock.acquire(blocking=False):
            return table.sample(count)
        try:
            try:
                workers = [worker for worker in self.workers if worker.ready()]
                share = count // (len(workers) + 1)
                for worker in workers:
                    worker.request(share)
                out = table.sample(count - share * len(workers))
                for worker in workers:
                    out.extend(worker.receive())
            except (EOFError, OSError):  # a helper died: carry on without helpers
                log.warning("an obfuscator helper process failed; continuing without helpers")
                self._close()
                self.count = 0
                return table.sample(count)
            return out
        finally:
            self._lock.release()

    def ready(self, timeout: float = 0.0) -> bool:
        """Whether every helper process is ready (waits up to `timeout` seconds each)."""
        with self._lock:
            try:
                return all(worker.ready(timeout) for worker in self.workers)
            except (EOFError, OSError):
                return False

    def close(self) -> None:
        """Stop the helper processes."""
        with self._lock:
            self._close()

    def _close(self) -> None:
        """Stop the helpers (the caller holds the lock)."""
        for worker in self.workers:
            worker.close()
        self.workers.clear()


def _stop(conn: Connection, process: multiprocessing.process.BaseProcess) -> None:
    try:
        conn.send(None)
    except (OSError, ValueError):  # already closed
        pass
    process.join(timeout=5)
    if process.is_alive():
        process.terminate()
    conn.close()


def _serve(
    conn: Connection,
    key: tuple[int, int | None],
    factors: tuple[int, int] | None,
    bases: list[list[int]] | None,
    parent_pid: int,
) -> None:
    """The helper's loop: a count in, a blob of that many obfuscators out; None stops.
    `key`: (n, h_s); `bases`: those of an `ObfuscatorTable`, None for a short-exponent one.
    The helper ends with `parent_pid`, even if it is killed (`secure.executor.lifeline`)."""
    watch_parent(parent_pid)
    public = PublicKey(mpz(key[0]), "helper", None if key[1] is None else mpz(key[1]))
    private = None if factors is None else PrivateKey(public, mpz(factors[0]), mpz(factors[1]))
    table: ObfuscatorTable | ShortExponentTable
    if bases is None and private is not None:
        table = ShortExponentTable(private)
    else:
        table = ObfuscatorTable(public, private, [[mpz(b) for b in row] for row in bases or []])
    width = (int(public.nsquare.bit_length()) + 7) // 8
    conn.send_bytes(_READY)
    while True:
        try:
            count = conn.recv()
        except EOFError:
            return
        if count is None:
            return
        conn.send_bytes(b"".join(int(s).to_bytes(width, "big") for s in table.sample(count)))
