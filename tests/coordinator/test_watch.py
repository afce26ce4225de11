"""Job feeds: one reader per followed job, however many follow it; followers see each
change, the end, or the error, and a feed goes away with its last follower."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from vfl.contract.states import CANCELLED, SUBMITTED, TRAINING, JobState
from vfl.coordinator.errors import UnknownJob
from vfl.coordinator.store import JobRecord
from vfl.coordinator.watch import JobFeeds
from vfl.proto import coordinator_pb2 as pb


class Jobs:
    """A job table in memory that counts its reads."""

    def __init__(self) -> None:
        self.records = {"j": JobRecord("j", "j", "", "", SUBMITTED, "", 0.0, 0.0, pb.JobResult())}
        self.reads = 0

    async def read(self, job_id: str) -> JobRecord:
        self.reads += 1
        if job_id not in self.records:
            raise UnknownJob(f"no job '{job_id}'")
        return self.records[job_id]

    def move(self, state: JobState) -> None:
        old = self.records["j"]
        self.records["j"] = dataclasses.replace(old, state=state, updated_at=old.updated_at + 1)


async def collect(feeds: JobFeeds, job_id: str, into: list[JobState]) -> None:
    async for record in feeds.follow(job_id):
        into.append(record.state)


def test_many_followers_share_one_reader_and_see_each_change() -> None:
    async def scenario() -> tuple[list[list[JobState]], int, int]:
        # Prepare: 100 followers of one job, polled every 10 s
        jobs = Jobs()
        feeds = JobFeeds(jobs.read, poll_s=10.0)
        seen: list[list[JobState]] = [[] for _ in range(100)]
        tasks = [asyncio.create_task(collect(feeds, "j", s)) for s in seen]
        await asyncio.sleep(0.05)
        reads_at_start = jobs.reads
        # Execute: two changes, each announced
        for state in (TRAINING, CANCELLED):
            jobs.move(state)
            feeds.changed("j")
            await asyncio.sleep(0.05)
        await asyncio.wait_for(asyncio.gather(*tasks), 1.0)
        return seen, reads_at_start, jobs.reads

    seen, reads_at_start, reads = asyncio.run(scenario())
    # Assert: every follower saw every state; one read each time, not one per follower
    assert all(s == [SUBMITTED, TRAINING, CANCELLED] for s in seen)
    assert reads_at_start == 1 and reads == 3


def test_a_change_nobody_announced_is_seen_at_the_next_poll() -> None:
    async def scenario() -> list[JobState]:
        jobs = Jobs()
        feeds = JobFeeds(jobs.read, poll_s=0.05)
        seen: list[JobState] = []
        task = asyncio.create_task(collect(feeds, "j", seen))
        await asyncio.sleep(0.1)
        jobs.move(CANCELLED)  # e.g. by a launch thread
        await asyncio.wait_for(task, 1.0)
        return seen

    assert asyncio.run(scenario()) == [SUBMITTED, CANCELLED]


def test_an_unknown_job_fails_its_followers_and_leaves_no_feed() -> None:
    async def scenario() -> JobFeeds:
        feeds = JobFeeds(Jobs().read, poll_s=0.05)
        for _ in range(2):  # the second follower starts afresh
            with pytest.raises(UnknownJob):
                await asyncio.wait_for(collect(feeds, "nope", []), 1.0)
        return feeds

    assert asyncio.run(scenario())._feeds == {}


def test_a_feed_stops_reading_when_its_last_follower_leaves() -> None:
    async def scenario() -> tuple[int, int]:
        jobs = Jobs()
        feeds = JobFeeds(jobs.read, poll_s=0.01)
        task = asyncio.create_task(collect(feeds, "j", []))
        await asyncio.sleep(0.1)
        task.cancel()  # the client went away
        await asyncio.gather(task, return_exceptions=True)
        reads = jobs.reads
        await asyncio.sleep(0.1)
        return reads, jobs.reads

    before, after = asyncio.run(scenario())
    assert before > 1 and after == before
