"""Exceptions of the `party` package.

PartyError          base
├── ConfigError     the party config file is invalid (names the field and the fix)
├── DataError       a dataset is missing or malformed (names the file, row, column)
├── JobError        a job cannot run here (unknown dataset, id sets differ, bad peer)
└── CheckpointError a checkpoint is missing, corrupt, or from another job or spec
"""

from __future__ import annotations


class PartyError(Exception):
    """Base class of party errors."""


class ConfigError(PartyError):
    """The party config is invalid."""


class DataError(PartyError):
    """A dataset file is missing or malformed."""


class JobError(PartyError):
    """A job cannot run on this party."""


class CheckpointError(PartyError):
    """A checkpoint cannot be used; the message names the job, the round and why."""
