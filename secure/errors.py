"""Exceptions of the `secure` package.

SecureError                 base of everything raised here
├── ChannelError            the data plane failed
│   ├── ChannelTimeout      recv() waited past its deadline
│   └── ChannelClosed       the job was cancelled or the channel closed
├── PayloadError            a peer sent a payload of the wrong kind, shape, width or count
├── PsiError                private set intersection cannot proceed (bad ids, no overlap)
└── KeyError_               a key is missing, malformed or below the minimum size
"""

from __future__ import annotations


class SecureError(Exception):
    """Base class of all errors raised by `secure`."""


class ChannelError(SecureError):
    """The data plane failed to deliver or receive an envelope."""


class ChannelTimeout(ChannelError):
    """No envelope with the expected tag arrived before the deadline."""


class ChannelClosed(ChannelError):
    """The channel was closed (job cancelled or failed elsewhere)."""


class PayloadError(SecureError):
    """A payload does not match what the protocol step expects."""


class KeyError_(SecureError):  # noqa: N801 - avoid shadowing the builtin KeyError
    """A key is missing, malformed or too small."""


class PsiError(SecureError):
    """Private set intersection cannot proceed: invalid or duplicate ids, an empty
    intersection, inconsistent party roles, or a peer that aborted the run."""
