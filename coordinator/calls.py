"""How a CoordinatorService call runs: worker threads, the caller, statuses, the answer.

The servicer (`coordinator.servicer`) runs on the coordinator's `grpc.aio` event loop and
never blocks it: each unary RPC is a method decorated with `unary`, whose body runs in a
worker thread of one of the `Pools`. The decorator finds the caller, turns domain errors
into statuses with their message (`CODES`; unexpected ones INTERNAL, never a crash), and
builds the response of the body's result.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

import grpc
from vfl.contract.errors import SpecError
from vfl.coordinator.errors import (
    AccessDenied,
    CoordinatorError,
    PartyUnavailable,
    UnknownJob,
    UnknownModel,
)
from vfl.coordinator.watch import JobFeeds
from vfl.rpc import call_with_status_async, check_caller_async, identify_caller_async

T = TypeVar("T")
Pool = Literal["reads", "parties", "commands"]  # a field of `Pools`
Work = Callable[[Any, Any, Any], Any]  # (servicer, caller, request) -> result, in a thread
Handler = Callable[[Any, Any, grpc.aio.ServicerContext], Awaitable[Any]]

CODES: list[tuple[type[Exception], grpc.StatusCode]] = [
    (AccessDenied, grpc.StatusCode.PERMISSION_DENIED),
    (SpecError, grpc.StatusCode.INVALID_ARGUMENT),
    (UnknownJob, grpc.StatusCode.NOT_FOUND),
    (UnknownModel, grpc.StatusCode.NOT_FOUND),
    (PartyUnavailable, grpc.StatusCode.FAILED_PRECONDITION),  # a party, not this daemon
    (CoordinatorError, grpc.StatusCode.INVALID_ARGUMENT),
    (ValueError, grpc.StatusCode.INVALID_ARGUMENT),
]


@dataclass(frozen=True)
class Pools:
    """Worker threads for the calls that may block, one pool per kind of caller, so that
    users' cancels (which call the parties, with 5 s deadlines) hold up neither the
    parties' reports nor anyone's reads. A call holds a thread only while it runs."""

    reads: ThreadPoolExecutor  # ListJobs, GetJob, GetJobReport, the job feeds of WatchJob
    parties: ThreadPoolExecutor  # RegisterParty, ReportProgress
    # SubmitJob, CancelJob, ResumeJob, and the model RPCs (they ask the parties, 3 s each)
    commands: ThreadPoolExecutor

    @classmethod
    def create(cls) -> Pools:
        return cls(
            ThreadPoolExecutor(4, thread_name_prefix="coordinator-read"),
            ThreadPoolExecutor(8, thread_name_prefix="coordinator-report"),
            ThreadPoolExecutor(8, thread_name_prefix="coordinator-command"),
        )

    def shutdown(self) -> None:
        """Wait for the calls in progress (each bounded by its deadlines)."""
        for pool in (self.reads, self.parties, self.commands):
            pool.shutdown(wait=True, cancel_futures=True)


class Serving(Protocol):
    """What `unary` needs of a servicer."""

    pools: Pools
    feeds: JobFeeds


def unary(
    pool: Pool,
    answer: Callable[[Any], Any] = lambda result: result,
    *,
    as_party: str | None = None,
    changes_job: bool = False,
) -> Callable[[Work], Handler]:
    """Make a unary RPC of a servicer method `work(self, caller, request) -> result`.

    The RPC, on the event loop: find the caller (`caller_of`), run `work` in a worker
    thread of `pool` with its errors as statuses (`in_thread`), tell the followers of the
    request's job that it changed when `changes_job`, and answer `answer(result)`.

    Args:
        pool: the `Pools` field whose threads run `work`.
        answer: the response of `work`'s result (default: the result itself).
        as_party: a party RPC, e.g. "register": the request's `party_id` must be the party
            the caller's certificate names ("register as party 'X'" in the refusal), and
            `work` gets it as its caller.
        changes_job: the RPC changes the job `request.job_id` names.
    """

    def wrap(work: Work) -> Handler:
        @functools.wraps(work)
        async def rpc(servicer: Serving, request: Any, context: grpc.aio.ServicerContext) -> Any:
            caller = await caller_of(context, request, as_party)
            threads = getattr(servicer.pools, pool)
            result = await in_thread(context, threads, work, servicer, caller, request)
            if changes_job:
                servicer.feeds.changed(request.job_id)
            return answer(result)

        return rpc

    return wrap


async def caller_of(
    context: grpc.aio.ServicerContext, request: Any, as_party: str | None = None
) -> str | None:
    """The party the caller's certificate names (None on an insecure server); for a party
    RPC (`as_party`) the party the request names, once the certificate is checked.

    Raises:
        grpc.aio.AbortError: the call was aborted with PERMISSION_DENIED (or, a party RPC
            naming no party, INVALID_ARGUMENT).
    """
    if as_party is None:
        return await identify_caller_async(context)
    party: str = request.party_id
    await check_caller_async(context, party, f"{as_party} as party '{party}'")
    return party


async def off_loop(pool: ThreadPoolExecutor, fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` in a thread of `pool`, awaited on the event loop."""
    return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)


async def in_thread(
    context: grpc.aio.ServicerContext, pool: ThreadPoolExecutor, fn: Callable[..., T], *args: Any
) -> T:
    """`fn(*args)` in a thread of `pool`; its errors become statuses by `CODES`.

    Raises:
        grpc.aio.AbortError: `fn` raised; the call was aborted with its status.
    """
    return await call_with_status_async(context, off_loop(pool, fn, *args), CODES)
