"""The errors the Python API raises: the platform's own typed errors, and how a failed
gRPC call becomes one of them (`translated`).

    SpecError               a job or prediction spec is invalid (names the field)
    CoordinatorError        base of what a coordinator call raises
    ├── UnknownJob          no job with that id
    ├── UnknownModel        no model with that id (never trained, or deleted)
    ├── PartyUnavailable    a party is not registered or does not answer
    │   └── ScoringBusy     a party refused at its capacity: retry after `retry_after_s`
    ├── AccessDenied        this identity may not do that
    ├── CoordinatorLost     the coordinator went away while a job was watched
    └── CoordinatorUnavailable  the coordinator could not be reached (names cause and fix)
    CertError               a TLS file is missing, expired or from another CA
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import grpc
from vfl.contract.errors import SpecError
from vfl.coordinator.errors import (
    AccessDenied,
    CoordinatorError,
    CoordinatorLost,
    CoordinatorUnavailable,
    PartyUnavailable,
    ScoringBusy,
    UnknownJob,
    UnknownModel,
)
from vfl.rpc import explain, retry_after_s
from vfl.secure.pki.certs import CertError

__all__ = [
    "AccessDenied",
    "CertError",
    "CoordinatorError",
    "CoordinatorLost",
    "CoordinatorUnavailable",
    "PartyUnavailable",
    "ScoringBusy",
    "SpecError",
    "UnknownJob",
    "UnknownModel",
    "translated",
]

_UNREACHABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


@contextmanager
def translated(
    address: str,
    tls: bool,
    expect: str | None,
    *,
    missing: type[CoordinatorError] = UnknownJob,
    invalid: type[Exception] = CoordinatorError,
    refused: type[CoordinatorError] = PartyUnavailable,
    unreachable: type[CoordinatorError] = CoordinatorUnavailable,
) -> Iterator[None]:
    """Calls to the daemon at `address` (whose certificate names `expect`) inside the block
    raise typed errors instead of `grpc.RpcError`, with the server's message.

    Args:
        tls: whether the call used TLS (for the message of a failed handshake).
        missing: raised for NOT_FOUND (an unknown job or model).
        invalid: raised for INVALID_ARGUMENT (e.g. `SpecError` for a submitted spec).
        refused: raised for FAILED_PRECONDITION (the coordinator: a party is missing).
        unreachable: raised when the daemon cannot be reached, naming the cause and fix.

    Raises:
        CoordinatorError: the subclass for the call's status (see Args); AccessDenied for
            PERMISSION_DENIED; ScoringBusy for RESOURCE_EXHAUSTED with a retry hint (a
            party at its capacity); else CoordinatorError itself, with the status's name.
        SpecError: when `invalid` is SpecError and the spec was refused.
    """
    try:
        yield
    except grpc.RpcError as exc:
        code, details = exc.code(), exc.details() or exc.code().name
        if code in _UNREACHABLE:
            raise unreachable(explain(exc, address, tls, expect)) from None
        if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
            hint = retry_after_s(exc)
            if hint is not None:  # refused at capacity: the message says when to retry
                raise ScoringBusy(details, hint) from None
            raise CoordinatorError(explain(exc, address, tls, expect)) from None
        kind: type[Exception] | None = {
            grpc.StatusCode.NOT_FOUND: missing,
            grpc.StatusCode.INVALID_ARGUMENT: invalid,
            grpc.StatusCode.PERMISSION_DENIED: AccessDenied,
            grpc.StatusCode.UNAUTHENTICATED: AccessDenied,
            grpc.StatusCode.FAILED_PRECONDITION: refused,
        }.get(code)
        if kind is None:
            raise CoordinatorError(f"{code.name}: {details}") from None
        raise kind(details) from None
