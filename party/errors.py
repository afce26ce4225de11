"""Exceptions of the `party` package.

PartyError          base
├── ConfigError     the party config file is invalid (names the field and the fix)
├── DataError       a dataset is missing or malformed (names the file, row, column)
├── JobError        a job cannot run here (unknown dataset, id sets differ, bad peer)
├── LimitExceeded   a job is over one of this party's limits (names it, the estimate, the fix)
│   └── MemoryLimitExceeded a running job's memory grew past the limit (the guard)
├── PartyBusy       a job fits, but not beside the jobs held now: it waits QUEUED
├── CheckpointError a checkpoint is missing, corrupt, or from another job or spec
│   └── DataChanged     a resume reads other values than its checkpoint's rows held
├── StateUnwritable the state directory cannot take a checkpoint or a model (a full disk)
├── ModelError      a model part is missing, deleted, corrupt, or does not fit the data
│   └── UnknownModel    this party holds no part of the model (never trained here, deleted)
├── AccessDenied    the caller's identity may not do this here (online scoring)
├── RequestError    a request is malformed (no ids, too many, an overlong id)
├── PeerUnavailable a peer of an online scoring session did not answer (retry)
├── TableUnavailable a table online scoring looks ids up in by query failed (retry)
├── Overloaded      at capacity (online scoring's queue, a job's mailbox): refused at once
│                   (retry after a hint)
└── ShuttingDown    this daemon is stopping: a peer's envelope is refused as UNAVAILABLE

An error has two forms. `str(error)` is the full message for this party's own log and
operator: it may name the party's files, columns and values. `error.public` is what may
leave the organisation (to the coordinator, and through it to every user of the job): the
kind of problem and what to do, never a local path, column name or value. A message with
nothing local in it is its own public form; a raise that names local details passes
`public=` too. `shareable` is the text of any error that may leave the party.

An error whose class sets `pauses` is one the party's operator can mend (free disk space,
put the data back): the job it ends pauses, to be resumed from its last whole checkpoint,
instead of failing for good.
"""

from __future__ import annotations

from vfl.contract.errors import ContractError, party_named
from vfl.secure.errors import SecureError


class PartyError(Exception):
    """Base class of party errors.

    Args:
        message: the full message (this party's log).
        public: the message without local paths, column names or values, where
            `message` has any; defaults to `message`.
    """

    pauses = False  # the job pauses (its operator can mend this), instead of failing

    def __init__(self, message: str, public: str | None = None) -> None:
        super().__init__(message)
        self.public = message if public is None else public


class ConfigError(PartyError):
    """The party config is invalid."""


class DataError(PartyError):
    """A dataset file is missing or malformed."""


class JobError(PartyError):
    """A job cannot run on this party."""


class LimitExceeded(PartyError):
    """A job is over one of this party's limits (`limits:` in its config, `party.limits`):
    the message names the limit, the job's estimate and the fix. The job fails."""


class MemoryLimitExceeded(LimitExceeded):
    """A running job's memory grew past the party's limit (`party.guard`): the party
    failed that job, and serves its other jobs on."""


class PartyBusy(PartyError):
    """A job fits this party's limits, but not beside the jobs it holds now (its
    max_concurrent_jobs, or memory they hold): the coordinator queues it until one ends."""


class CheckpointError(PartyError):
    """A checkpoint cannot be used; the message names the job, the round and why."""


class DataChanged(CheckpointError):
    """A resume reads values other than those the checkpoint's rows held (same ids, other
    content): refused before a round trains on them. The job pauses: once the party
    puts back the data the job began with, it resumes."""

    pauses = True


class StateUnwritable(PartyError):
    """This party's state directory cannot take a checkpoint or a model part (its disk is
    full, or it turned read-only): the job pauses, and resumes from its last whole
    checkpoint once there is room."""

    pauses = True


class ModelError(PartyError):
    """A stored model cannot be used: not held, deleted, corrupt, or the data does not fit
    it (the message names the model, the party and the fix)."""


class UnknownModel(ModelError):
    """This party holds no part of the model: it was never trained here, or deleted."""


class AccessDenied(PartyError):
    """The caller's certificate names an identity that may not do this on this party."""


class RequestError(PartyError):
    """A request to this party is malformed; the message says what to send instead."""


class PeerUnavailable(PartyError):
    """A peer of an online scoring session did not answer or dropped the session; the
    request may be retried (the next one opens a new session)."""


class TableUnavailable(PartyError):
    """A table that online scoring queries by id (a database) could not give the rows of
    a micro-batch: its database is down or refused, its query failed, took too long, or
    returned rows that do not fit the model. The message names the party and the dataset;
    the request may be retried once the party has fixed it."""


class Overloaded(PartyError):
    """This party is at a capacity: online scoring's (a model's queue is full, or its
    micro-batches cannot answer one more request in time), or a job's mailbox (its
    envelopes not yet taken fill `limits.mailbox_mb`). The request is refused at once,
    never queued past its bound; retry after `retry_after_s` seconds (the servicer sends
    it as the retry hint, RESOURCE_EXHAUSTED). `at` names the bound (the daemon's metrics
    count refusals by it)."""

    def __init__(self, message: str, retry_after_s: float, at: str = "model queue") -> None:
        super().__init__(message)
        self.retry_after_s, self.at = retry_after_s, at


class ShuttingDown(PartyError):
    """This daemon is stopping. A peer's envelope is refused as unavailable, not as a
    job that ended: the job pauses (and resumes once the daemon is back) instead of
    failing."""


def shareable(exc: BaseException, party_id: str) -> str:
    """What of `exc` may leave party `party_id`: a party error's public form, a protocol
    or spec error's message (they name steps, counts and fields), else only the error's
    type; where anything is held back, it says the details are in this party's log."""
    if isinstance(exc, PartyError):
        text = exc.public
    elif isinstance(exc, (SecureError, ContractError)):
        text = str(exc)
    else:
        text = f"unexpected {type(exc).__name__}"
    if text == str(exc):
        return text
    return f"{text} (details in the log of party '{party_id}')"


def failure_reason(exc: BaseException, party_id: str) -> str:
    """The reason a job failed at party `party_id` for `exc`, as it leaves the party:
    `shareable`, named for the party once (a message that names it already is not
    prefixed again)."""
    return party_named(party_id, shareable(exc, party_id))
