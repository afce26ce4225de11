"""Exceptions of the `coordinator` package.

CoordinatorError        base (a malformed job spec is `vfl.contract.errors.SpecError`)
├── UnknownJob          no job with that id
├── UnknownModel        no model with that id (never trained, or deleted)
├── PartyUnavailable    a party named by a job is not registered or not reachable
│   ├── PartyRefused    a party refused the job's input (its data, a model it does not fit)
│   └── ScoringBusy     a party refused an online request at its capacity (retry after a hint)
├── PartyBusy           a party cannot take the job yet (its limits): the job waits QUEUED
├── AccessDenied        the caller's identity may not do this (coordinator.access)
├── StoreInUse          another coordinator holds the job database
├── CoordinatorLost     a client lost its connection to the coordinator mid-watch
└── CoordinatorUnavailable  a client could not reach the coordinator (names cause and fix)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


class CoordinatorError(Exception):
    """Base class of coordinator errors."""


class UnknownJob(CoordinatorError):
    """No job with the given id exists."""


class UnknownModel(CoordinatorError):
    """No model with the given id: no training job with it succeeded, or it was deleted."""


class PartyUnavailable(CoordinatorError):
    """A party is not registered or does not answer."""


class PartyUnregistered(PartyUnavailable):
    """A party of the job never registered with this coordinator (`missing`: their ids)."""

    def __init__(self, message: str, missing: list[str]) -> None:
        super().__init__(message)
        self.missing = missing


class PartyRefused(PartyUnavailable):
    """A party answered and refused to prepare the job: its data is malformed, does not fit
    the model, or the job names what it does not expose (the user's input, not a fault)."""


class ScoringBusy(PartyUnavailable):
    """A party refused an online scoring request at once because it was at its capacity
    (RESOURCE_EXHAUSTED); the same request may be retried after `retry_after_s` seconds."""

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class PartyBusy(CoordinatorError):
    """A party holds as many jobs as its limits allow (or their memory leaves no room for
    this one): the job waits QUEUED and is launched once the party has room."""


class AccessDenied(CoordinatorError):
    """The caller's identity may not do this (a party may only read the jobs it is in)."""


class StoreInUse(CoordinatorError):
    """Another coordinator process has the same job database open."""


class CoordinatorLost(CoordinatorError):
    """The coordinator went away (stopped or restarted) while a client followed a job."""


class CoordinatorUnavailable(CoordinatorError):
    """The coordinator could not be reached: not running, wrong address, or the TLS
    handshake failed (the message names the cause and the fix)."""


@contextlib.contextmanager
def of_model(model_id: str) -> Iterator[None]:
    """A call about model `model_id`: no job of that id is no such model (`UnknownModel`)."""
    try:
        yield
    except UnknownJob:
        raise UnknownModel(f"no model {model_id}; list them with `vfl models`") from None
