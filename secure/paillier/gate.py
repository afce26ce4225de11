"""`Gate`: when a party's background obfuscator refills may run.

A refill thread that ran while the party computes would take half of the interpreter
from it, so every pool for repeated use refills only while its gate is open, and
`PartyCrypto` holds the gate open only while the party waits for a peer message
(`secure.paillier.obfuscators`, `secure.paillier.pool_cache`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Gate:
    """Open while anyone holds it open; background refills gated by it run only then."""

    def __init__(self) -> None:
        self._holders = 0
        self._changed = threading.Condition()

    def open(self) -> None:
        with self._changed:
            self._holders += 1
            self._changed.notify_all()

    def close(self) -> None:
        with self._changed:
            self._holders = max(0, self._holders - 1)

    @contextmanager
    def held(self) -> Iterator[None]:
        """Hold the gate open for the block."""
        self.open()
        try:
            yield
        finally:
            self.close()

    def is_set(self) -> bool:
        with self._changed:
            return self._holders > 0

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the gate is open (up to `timeout` seconds); whether it is."""
        with self._changed:
            return self._changed.wait_for(lambda: self._holders > 0, timeout)
