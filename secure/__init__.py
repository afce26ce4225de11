"""Cryptographic primitives and the multi-party protocols written against `Channel`.

    vfl.secure.paillier        the Paillier engine: keys, encryption, packing, obfuscators
    vfl.secure.ou              Okamoto-Uchiyama: keys, the owner's encryption, decryption
    vfl.secure.histograms      encrypted bucket sums (secure trees' histograms, WOE/IV)
    vfl.secure.source_layers   BlindFL's MatMul and Embed-MatMul source layers
    vfl.secure.psi             private set intersection (the ALIGNING stage)
    vfl.secure.pki             the federation CA, certificates and their rotation
    vfl.secure.wire            arrays, keys and ciphertexts as `Payload` protobufs
    vfl.secure.channel         the `Channel` the protocols are written against
    vfl.secure.executor        where a party's heavy homomorphic work runs

This package exports the settings of the protocols (`SecureConfig`) and the exceptions
they raise (`secure.errors`: one tree under `SecureError`); the rest is imported from
its module. It loads neither the channel nor the generated messages, so that
`vfl.secure.paillier` stays free of both. Nothing in this package imports grpc, `party`
or `coordinator`.
"""

from vfl.secure.config import SecureConfig
from vfl.secure.errors import (
    ChannelBusy,
    ChannelClosed,
    ChannelError,
    ChannelTimeout,
    ConfigError,
    EncodingError,
    ExecutorError,
    InputError,
    OuKeyError,
    PaillierKeyError,
    PayloadError,
    PsiError,
    SecureError,
    StateError,
)

__all__ = [
    "ChannelBusy",
    "ChannelClosed",
    "ChannelError",
    "ChannelTimeout",
    "ConfigError",
    "EncodingError",
    "ExecutorError",
    "InputError",
    "OuKeyError",
    "PaillierKeyError",
    "PayloadError",
    "PsiError",
    "SecureConfig",
    "SecureError",
    "StateError",
]
