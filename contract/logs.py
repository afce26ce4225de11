"""Log lines that name their job: a context variable holds the job a thread works on, and
a filter writes it into every record (`%(job)s`, "-" outside a job).

A job's thread sets it once (`job_context`); threads that a job's work starts copy the
context (`contextvars.copy_context().run`), so their lines name the job too. Both daemons
log through `configure_daemon_logging`. Logs name jobs, rounds and parties, never a value,
a share or a key.
"""

from __future__ import annotations

import contextvars
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

CURRENT_JOB: contextvars.ContextVar[str] = contextvars.ContextVar("vfl_job", default="-")

FORMAT = "%(asctime)s %(levelname)s [job %(job)s] %(name)s: %(message)s"


@contextmanager
def job_context(job_id: str) -> Iterator[None]:
    """Name `job_id` on every log line of this thread (and threads it copies it to)."""
    token = CURRENT_JOB.set(job_id)
    try:
        yield
    finally:
        CURRENT_JOB.reset(token)


class JobFilter(logging.Filter):
    """Adds `record.job`: the job of the logging thread's context."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.job = CURRENT_JOB.get()
        return True


def configure_daemon_logging(level: int = logging.INFO) -> None:
    """Log to stderr, each line with its time, level, job and logger."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(JobFilter())
    handler.setFormatter(logging.Formatter(FORMAT))
    logging.basicConfig(level=level, handlers=[handler], force=True)
