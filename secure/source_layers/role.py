"""`LayerRole`: what every role of both source layers is built on.

A role (party B or a party A_k of the MatMul or the Embed-MatMul layer) holds its
channel, configuration, job seed, test-only initial shares and its party's crypto bundle
(`secure.source_layers.crypto.PartyCrypto`), and checkpoints the same way
(`secure.source_layers.state`). Its `state_dict()` is

    key           the modulus of the party's own public key (loading checks it)
    obfuscators   the secret bases of its fixed-base obfuscator tables
    params        the layer parameters the active party decided
    ...           the role's own fields (`_saved`)

and its `load_state_dict()` checks the first three against this layer, then hands the
parameters and the role's fields to the role (`_load_saved`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from vfl.secure.channel import Channel
from vfl.secure.config import SecureConfig
from vfl.secure.paillier.keys import KeyPair
from vfl.secure.source_layers.common import InitialShares, Wire
from vfl.secure.source_layers.crypto import PartyCrypto
from vfl.secure.source_layers.state import (
    LayerParamsLike,
    LayerState,
    modulus_state,
    params_state,
    restored_params,
)

P = TypeVar("P", bound=LayerParamsLike)
# (tag, rows of plaintexts): what a party decrypted, for its own record of its view
DecryptHook = Callable[[str, Sequence[Sequence[int]]], None]


class LayerRole(ABC, Generic[P]):
    """What every role of a source layer holds: its channel, configuration, job seed,
    test-only initial shares and crypto bundle; the controls of its background work; and
    its checkpoints (the module doc)."""

    _params_type: type[P]  # the layer parameters of the role's layer
    _saved_as: str  # how errors name a saved state of this role

    def __init__(
        self,
        channel: Channel,
        config: SecureConfig,
        seed: int,
        init: InitialShares | None,
        keypair: KeyPair | None,
        *,
        own_pool: bool,
    ) -> None:
        """`own_pool`: see `PartyCrypto`.

        Raises:
            PaillierKeyError: no key pair given and `config.key_bits` is below the minimum.
        """
        self.channel, self.config, self.seed = channel, config, seed
        self._init = init or {}
        self._crypto = PartyCrypto(channel.party_id, config, keypair, own_pool)
        # `vfl attack`: sees every plaintext this role decrypts (None: nothing does)
        self.on_decrypt: DecryptHook | None = None

    def _decrypted(self, tag: str, rows: Sequence[Sequence[int]]) -> None:
        """Hand the plaintexts decrypted from the envelope(s) under `tag` to `on_decrypt`."""
        if self.on_decrypt is not None:
            self.on_decrypt(tag, rows)

    def fill_obfuscator_pools(self) -> None:
        """Precompute the r^n obfuscators of coming steps now (blocks until full)."""
        self._crypto.fill_pools()

    def close(self) -> None:
        """Stop background work (obfuscator refills, matmul processes)."""
        self._crypto.close()

    def _wire_to(self, peer: str) -> Wire:
        """The ciphertext messages to and from `peer` (receives wait `timeout_s`)."""
        return Wire(self.channel, peer, self.config.timeout_s, self._crypto)

    def state_dict(self) -> LayerState:
        """This role's state as plain values (the module doc, `secure.source_layers.state`);
        call between rounds.

        Raises:
            SecureError: setup() has not run.
        """
        params, fields = self._saved()
        return {
            "key": modulus_state(self._crypto.keypair.public),
            "obfuscators": self._crypto.tables_state(),
            "params": params_state(params),
            **fields,
        }

    def load_state_dict(self, state: LayerState) -> None:
        """Continue from a `state_dict()` instead of running `setup()`: nothing is sent.

        Raises:
            StateError: saved with another key pair or for another layer, or corrupt.
            PaillierKeyError: a saved key below the minimum size.
            SecureError: setup() or load_state_dict() has run already.
        """
        key = self._crypto.keypair.public
        params = restored_params(self._params_type, state, key, self._started(), self._saved_as)
        self._crypto.restore_tables(state.get("obfuscators"))
        self._load_saved(params, state)

    @abstractmethod
    def _saved(self) -> tuple[P, LayerState]:
        """The layer parameters and the role's own fields of `state_dict()`.

        Raises:
            SecureError: setup() has not run.
        """

    @abstractmethod
    def _started(self) -> bool:
        """Whether setup() or load_state_dict() has begun to fill this layer."""

    @abstractmethod
    def _load_saved(self, params: P, state: LayerState) -> None:
        """Take the role's own fields of a `state_dict()` saved under this party's key,
        with its (restored) layer parameters `params`.

        Raises:
            StateError: they do not fit this layer, or are corrupt.
            PaillierKeyError: a saved key below the minimum size.
        """
