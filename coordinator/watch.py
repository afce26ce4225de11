"""Following jobs on the coordinator's event loop, without a thread per follower.

However many clients follow a job (`WatchJob`: `vfl watch`, `vfl submit --wait`, `vfl
run`), one task reads it: from the store through `read` (which runs in a worker thread),
every `poll_s`, and at once after `changed(job_id)` (the servicer calls it when a report
or a cancel changed the job). Followers wait on the job's `asyncio.Condition` and hold no
thread, so the number of jobs that can be watched is not bounded by any thread pool.
Changes made by the coordinator's own threads (launch, health monitor) are seen at the
next poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable

from vfl.coordinator.store import JobRecord

Read = Callable[[str], Awaitable[JobRecord]]


class _Feed:
    """The latest record (or read error) of one job, for all of its followers."""

    def __init__(self) -> None:
        self.changed = asyncio.Condition()
        self.record: JobRecord | None = None
        self.error: Exception | None = None
        self.followers = 0
        self.nudge = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    def news(self, last: float | None) -> bool:
        return self.error is not None or (
            self.record is not None and self.record.updated_at != last
        )


class JobFeeds:
    """Args:
    read: a job's record by id (raises `UnknownJob`); must not block the loop.
    poll_s: how often a followed job is read when nothing said it changed.
    """

    def __init__(self, read: Read, poll_s: float) -> None:
        self._read, self._poll_s = read, poll_s
        self._feeds: dict[str, _Feed] = {}

    def watched(self) -> dict[str, int]:
        """How many clients follow each followed job."""
        return {job_id: feed.followers for job_id, feed in self._feeds.items()}

    def changed(self, job_id: str) -> None:
        """Job `job_id` changed: its followers get it now, not at the next poll. Call on the
        event loop."""
        feed = self._feeds.get(job_id)
        if feed is not None:
            feed.nudge.set()

    async def follow(self, job_id: str) -> AsyncIterator[JobRecord]:
        """The job's record now and after each change, until it ends.

        Raises:
            UnknownJob: no such job (or another error of `read`).
        """
        feed = self._feeds.get(job_id)
        if feed is None:
            feed = self._feeds[job_id] = _Feed()
            feed.task = asyncio.create_task(self._run(job_id, feed), name=f"feed {job_id}")
        feed.followers += 1
        try:
            last: float | None = None
            while True:
                async with feed.changed:
                    await feed.changed.wait_for(functools.partial(feed.news, last))
                if feed.error is not None:
                    raise feed.error
                assert feed.record is not None  # news() said so
                record = feed.record
                last = record.updated_at
                yield record
                if record.terminal:
                    return
        finally:
            feed.followers -= 1
            if feed.followers == 0 and self._feeds.get(job_id) is feed:
                del self._feeds[job_id]
                if feed.task is not None:
                    feed.task.cancel()

    async def _run(self, job_id: str, feed: _Feed) -> None:
        """Read the job until it ends (or cannot be read), publishing each record."""
        try:
            while True:
                feed.nudge.clear()
                try:
                    feed.record = await self._read(job_id)
                except Exception as exc:  # noqa: BLE001 - handed to the followers
                    feed.error = exc
                async with feed.changed:
                    feed.changed.notify_all()
                if feed.error is not None or feed.record is None or feed.record.terminal:
                    return
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(feed.nudge.wait(), self._poll_s)
        finally:
            if self._feeds.get(job_id) is feed:  # a later follower starts a fresh feed
                del self._feeds[job_id]

    def close(self) -> None:
        """Stop every feed (the server is stopping). Call on the event loop."""
        for feed in list(self._feeds.values()):
            if feed.task is not None:
                feed.task.cancel()
        self._feeds.clear()
