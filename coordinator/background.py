"""The coordinator's background threads: launches, aborts and retries that a call starts
but does not wait for; a stopping daemon waits for them (`Background.join`)."""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable
from typing import Any


class Background:
    """Runs calls in daemon threads, each in a copy of the caller's context (so that a
    job's abort thread logs the job's id, `contract.logs.job_context`)."""

    def __init__(self) -> None:
        self._threads: list[threading.Thread] = []

    def run(self, target: Callable[..., Any], *args: Any) -> None:
        """Start `target(*args)` in a new thread."""
        context = contextvars.copy_context()
        thread = threading.Thread(target=context.run, args=(target, *args), daemon=True)
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    def join(self, timeout: float) -> None:
        """Wait for the threads, for `timeout` seconds at most in all."""
        deadline = time.monotonic() + timeout
        for thread in list(self._threads):
            thread.join(max(0.0, deadline - time.monotonic()))
