"""Exceptions of the `secure` package.

SecureError                 base of everything raised here
├── ChannelError            the data plane failed
│   ├── ChannelTimeout      recv() waited past its deadline
│   ├── ChannelClosed       the job was cancelled or the channel closed
│   └── ChannelBusy         a mailbox has no room for an envelope now (the sender may retry)
├── PayloadError            a peer sent a payload of the wrong kind, shape, width or count
├── PsiError                private set intersection cannot proceed (bad ids, no overlap)
├── PaillierKeyError        a Paillier key is missing, malformed or below the minimum size
├── OuKeyError              an Okamoto-Uchiyama key is missing, malformed or below the
│                           minimum size (`secure.ou`)
├── StateError              a source layer's saved state does not fit the layer it is
│                           loaded into (another key, size, shape or corrupt values)
├── CertError               a CA or certificate is missing, invalid, expired or would be
│                           overwritten (`secure.pki.certs`)
├── ConfigError             a SecureConfig field or a layer's set-up argument (sizes, party
│                           ids, vocabularies) is invalid (also a ValueError)
├── InputError              a caller's value is malformed: features, codes, gradients, lr,
│   │                       initial shares (also a ValueError)
│   └── VocabularyError     categorical codes outside their field's vocabulary
│                           (`secure.source_layers.embed`)
├── EncodingError           a value does not fit its fixed-point scale or slot (also a
│                           ValueError)
└── ExecutorError           the party's executor cannot run: its optional engine (Ray) is
                            not installed, or its cluster cannot be reached
                            (`secure.executor`)

The ValueError bases keep `except ValueError` callers working. Every message says what is
wrong and what to do about it.
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


class ChannelBusy(ChannelError):
    """A mailbox cannot take an envelope now: the envelopes it holds (received and not
    yet taken, or still arriving) would pass its bound, or the same envelope is still
    arriving. The sender may retry once the receiver has taken some."""


class PayloadError(SecureError):
    """A payload does not match what the protocol step expects."""


class PaillierKeyError(SecureError):
    """A Paillier key is missing (a private key this context does not hold), malformed
    (a modulus, h_s or factors that do not fit) or below the minimum size."""


class OuKeyError(SecureError):
    """An Okamoto-Uchiyama key is missing (a private key this party does not hold),
    malformed (factors, bases or sizes that do not fit) or below the minimum size."""


class StateError(SecureError):
    """A source layer's saved state (`state_dict()`) cannot be loaded into this layer: it
    was written under another key pair or layer shape, or its values are corrupt."""


class PsiError(SecureError):
    """Private set intersection cannot proceed: invalid or duplicate ids, an empty
    intersection, inconsistent party roles, or a peer that aborted the run."""


class ConfigError(SecureError, ValueError):
    """A `SecureConfig` field, or an argument that sets up a layer (dimensions, party ids,
    vocabulary sizes, an obfuscator method), is invalid; the message names it."""


class InputError(SecureError, ValueError):
    """A value handed in by the caller (features, codes, gradients, learning rate,
    initial shares) has the wrong shape, type or non-finite entries."""


class EncodingError(SecureError, ValueError):
    """A value is too large (or not finite) for its fixed-point scale, or overflows the
    slots it is packed into."""


class ExecutorError(SecureError):
    """The party's executor cannot run its blocks: the engine its config names is not
    installed, or the cluster it names cannot be reached (`secure.executor`)."""
