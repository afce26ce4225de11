"""Errors to gRPC statuses: how a servicer answers a call that failed.

`status_of` is the one decision (the first matching entry of a servicer's `Codes`, else
INTERNAL, logged with its traceback); `call_with_status` and `call_with_status_async` run a
servicer's work and abort the call with that status, so a servicer never crashes.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import grpc

log = logging.getLogger(__name__)
T = TypeVar("T")

Codes = Sequence[tuple[type[Exception], grpc.StatusCode]]  # error type -> status, first match
Problem = tuple[grpc.StatusCode, str]  # the status a call is answered with


def status_of(
    exc: Exception, codes: Codes, message: Callable[[Exception], str] | None = None
) -> Problem:
    """The status an error is answered with, with its message (or `message(error)`, what of
    it may be shown to the caller): the first matching entry of `codes`, else INTERNAL
    (logged with its traceback)."""
    shown = str(exc) if message is None else message(exc)
    for kind, code in codes:
        if isinstance(exc, kind):
            return code, shown or type(exc).__name__
    log.error("internal error", exc_info=exc)
    if message is None:
        shown = f"{type(exc).__name__}: {exc}"
    return grpc.StatusCode.INTERNAL, f"internal error: {shown}"


def call_with_status(
    context: grpc.ServicerContext,
    fn: Callable[[], T],
    codes: Codes,
    message: Callable[[Exception], str] | None = None,
) -> T:
    """Run a servicer's `fn`, turning errors into a gRPC status (`status_of`). A servicer
    never crashes.

    Raises:
        Exception: gRPC's abort of the call (`context.abort`), never `fn`'s own error.
    """
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - every error becomes a status, never a crash
        if context.code() is not None:
            raise  # already aborted (e.g. a request that does not parse)
        context.abort(*status_of(exc, codes, message))
    raise AssertionError("unreachable")  # context.abort raises


async def call_with_status_async(
    context: grpc.aio.ServicerContext, call: Awaitable[T], codes: Codes
) -> T:
    """`call_with_status` for a `grpc.aio` servicer: await `call` (e.g. work in a thread,
    `loop.run_in_executor`), turning its errors into a gRPC status (`status_of`).

    Raises:
        grpc.aio.AbortError: the call was aborted, by `call` itself or with its error's
            status.
    """
    try:
        return await call
    except grpc.aio.AbortError:
        raise  # already aborted
    except Exception as exc:  # noqa: BLE001 - every error becomes a status, never a crash
        await context.abort(*status_of(exc, codes))
    raise AssertionError("unreachable")  # context.abort raises
