"""Following a job on the coordinator (`WatchJob`) until it ends, what `vfl watch` (with
its progress bar) and `Client.watch` / `Client.wait` share: the job's views as they come,
and a typed error when the coordinator goes away before the job ended."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
from vfl.coordinator.client import CoordinatorClient, JobView
from vfl.coordinator.errors import CoordinatorLost
from vfl.results import ENDED

# how a stream that was running breaks when the coordinator's process stops or restarts
_LOST = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.UNKNOWN)


def views(client: CoordinatorClient, job_id: str) -> Iterator[JobView]:
    """The views of job `job_id` as the coordinator sends them, the last one ended (a
    stream with no view at all yields the job as it is once).

    Raises:
        CoordinatorLost: the coordinator went away after the watch began (the stream
            broke, or ended before the job did).
        grpc.RpcError: the watch could not begin (unreachable, TLS handshake, no job).
    """
    last: JobView | None = None
    try:
        for view in client.watch(job_id):
            last = view
            yield view
    except grpc.RpcError as exc:
        if last is None or exc.code() not in _LOST:
            raise
        raise CoordinatorLost(_lost(client, job_id, last)) from None
    if last is None:
        yield client.get(job_id)
    elif last.state not in ENDED:
        raise CoordinatorLost(_lost(client, job_id, last))


def _lost(client: CoordinatorClient, job_id: str, last: JobView) -> str:
    return (
        f"the connection to the coordinator at {client.address} was lost (it stopped or "
        f"restarted) while job {job_id} was {last.state}"
    )
