"""Following a job on the coordinator until it ends, what `vfl watch` (with its progress
bar) and `Client.wait` share: `follow` reads the job's views from anything that yields
them (`Client.views`, or the coordinator's own client) and returns the last one, ended.
The views come typed (`JobView`); the coordinator going away before the job ended is
`CoordinatorLost`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

from vfl.coordinator.client import JobView


class Followable(Protocol):
    """What yields a job's views until it ends: `vfl.Client`, or the coordinator's client."""

    def views(self, job_id: str) -> Iterator[JobView]:
        """The job's views as they change, the last one ended."""
        ...


def follow(
    client: Followable, job_id: str, each: Callable[[JobView], object] | None = None
) -> JobView:
    """Follow job `job_id` until it ends, calling `each(view)` for every view; returns the
    last view (ended).

    Raises:
        CoordinatorLost: the coordinator went away after the watch began.
        UnknownJob (from `vfl.Client`), grpc.RpcError (from the coordinator's client): the
            watch could not begin (unreachable, TLS handshake, no job).
    """
    last: JobView | None = None
    for view in client.views(job_id):
        if each is not None:
            each(view)
        last = view
    if last is None:  # `views` yields at least once
        raise AssertionError(f"no view of job {job_id}")
    return last
