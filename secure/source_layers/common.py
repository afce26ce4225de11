"""What every role of both source layers shares: the types of its inputs, fixed-point
packing, the ciphertext messages to and from one peer (`Wire`), and the values a forward
step keeps for its backward step (`Pending`)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from typing import Any, Generic, TypeAlias, TypeVar

import numpy as np
import scipy.sparse as sp
from vfl.secure.channel import Channel
from vfl.secure.errors import SecureError
from vfl.secure.paillier.cipher_matmul import feature_exponents
from vfl.secure.paillier.cipher_matrix import CipherMatrix
from vfl.secure.paillier.encoding import Packer, encode
from vfl.secure.paillier.engine import Paillier
from vfl.secure.paillier.keys import PublicKey
from vfl.secure.source_layers.crypto import PartyCrypto
from vfl.secure.wire.ciphertexts import ciphertexts_from_payload, ciphertexts_to_payload

Features: TypeAlias = np.ndarray | sp.csr_matrix  # noqa: UP040
# Initial shares handed in by tests, by name: an array, or one array per field (tables).
InitialShares: TypeAlias = Mapping[str, Any]  # noqa: UP040
RowRef: TypeAlias = tuple[str, np.ndarray]  # noqa: UP040 - (precomputed set, row indices)
T = TypeVar("T")


def exponents(x: Features, feature_bits: int) -> sp.csr_matrix:
    """Fixed-point exponents of a checked feature batch (see `feature_exponents`)."""
    return feature_exponents(x, feature_bits)


def pack_real(packer: Packer, values: np.ndarray, scale_bits: int) -> list[list[int]]:
    """Encode reals at 2^scale_bits and pack each row.

    Raises:
        EncodingError: a value does not fit a slot at this scale.
    """
    return packer.pack(encode(values, scale_bits))


def flat(rows: Sequence[Sequence[T]]) -> list[T]:
    """Rows of values as one list, row after row."""
    return [value for row in rows for value in row]


def shaped(values: Sequence[T], cols: int) -> list[list[T]]:
    """A flat list as rows of `cols` values (the inverse of `flat`)."""
    return [list(values[i : i + cols]) for i in range(0, len(values), cols)]


class Wire:
    """Ciphertext messages between this party and one peer, checked on receipt; while a
    receive waits, the party's obfuscator pools may refill in the background."""

    def __init__(
        self, channel: Channel, peer: str, timeout: float | None, crypto: PartyCrypto
    ) -> None:
        """`timeout`: the deadline of every receive (None: the channel's default)."""
        self.channel, self.peer, self.timeout, self.crypto = channel, peer, timeout, crypto

    def send(self, tag: str, matrix: CipherMatrix) -> None:
        """Raises:
        ChannelError: the message cannot be delivered (see `Channel.send`).
        """
        self.channel.send(self.peer, tag, ciphertexts_to_payload(matrix))

    def recv(
        self,
        tag: str,
        key: PublicKey,
        shape: tuple[int | None, int | None],
        slots: int,
        scale: int,
        *,
        refill: bool = True,
    ) -> CipherMatrix:
        """The ciphertext matrix `tag`, checked (`ciphertexts_from_payload`); `refill`:
        the pools may refill in the background while this waits (the MatMul layer's
        setup waits without).

        Raises:
            PayloadError: wrong kind, key, width, shape, count, slots or scale.
            ChannelError: nothing arrived in time, or the job was closed.
        """
        with self.crypto.waiting() if refill else nullcontext():
            payload = self.channel.recv(self.peer, tag, self.timeout)
        return ciphertexts_from_payload(payload, key, shape=shape, slots=slots, scale_bits=scale)


def encrypt_matrix(
    he: Paillier, packer: Packer, values: np.ndarray, scale_bits: int
) -> CipherMatrix:
    """Encrypt a real matrix row-packed at 2^scale_bits under `he`'s key."""
    packed = pack_real(packer, values, scale_bits)
    cols = packer.columns(values.shape[1])
    cipher = shaped(he.encrypt(flat(packed)), cols) if packed else []
    return CipherMatrix(cipher, cols, he.pk, packer.slots, scale_bits)


class Pending(Generic[T]):
    """Per-step values of recent forward steps (by tag), for the backward step that follows."""

    def __init__(self, fix: str, keep: int = 16) -> None:
        """`fix`: what the error of a backward step with no forward step asks the caller
        to do; `keep`: how many forward steps to remember (the oldest go first)."""
        self._fix = fix
        self._keep = keep
        self._items: OrderedDict[str, T] = OrderedDict()

    def remember(self, tag: str, value: T) -> None:
        self._items[tag] = value
        while len(self._items) > self._keep:
            self._items.popitem(last=False)

    def take(self, tag: str) -> T:
        """The values of forward step `tag`, else of the latest one.

        Raises:
            SecureError: no forward step is pending.
        """
        if tag in self._items:
            return self._items.pop(tag)
        if self._items:
            return self._items.popitem(last=True)[1]
        raise SecureError(f"backward('{tag}') has no forward step; {self._fix}")
