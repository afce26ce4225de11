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
`close()` (or when the object is garbage collected): a script that uses helpers needs
the usual `if __name__ == "__main__":` guard.
"""

from __future__ import annotations

import multiprocessing
import weakref
from multiprocessing.connection import Connection

from gmpy2 import mpz
from vfl.secure.paillier.fixed_base import ObfuscatorTable
from vfl.secure.paillier.keys import PrivateKey, PublicKey
from vfl.secure.paillier.short_exponent import ShortExponentTable

_READY = b"ready"


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
            args=(child, (int(public_key.n), h_s), factors, bases),
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
) -> None:
    """The helper's loop: a count in, a blob of that many obfuscators out; None stops.
    `key`: (n, h_s); `bases`: those of an `ObfuscatorTable`, None for a short-exponent one."""
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
