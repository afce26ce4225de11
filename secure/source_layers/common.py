"""What every role of both source layers shares: one party's crypto bundle, input and
initial-share checks, the ciphertext send/receive steps, and the values a forward step
keeps for its backward step."""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from functools import partial
from typing import Any, Generic, TypeAlias, TypeVar

import numpy as np
import scipy.sparse as sp
from vfl.secure.channel import Channel
from vfl.secure.config import SecureConfig
from vfl.secure.errors import ConfigError, InputError, PayloadError, SecureError, StateError
from vfl.secure.paillier.cipher_matmul import CipherMatmul, feature_exponents
from vfl.secure.paillier.cipher_matrix import CipherMatrix
from vfl.secure.paillier.encoding import Packer, encode
from vfl.secure.paillier.engine import Paillier
from vfl.secure.paillier.keys import KeyPair, PrivateKey, PublicKey, generate_keypair
from vfl.secure.paillier.obfuscators import Gate, ObfuscatorPool
from vfl.secure.paillier.pool_cache import PoolCache
from vfl.secure.source_layers.sharing import sample_share
from vfl.secure.source_layers.state import LayerState, SavedTable, tables_from_state, tables_state
from vfl.secure.wire.ciphertexts import ciphertexts_from_payload, ciphertexts_to_payload

Features: TypeAlias = np.ndarray | sp.csr_matrix  # noqa: UP040
# Initial shares handed in by tests, by name: an array, or one array per field (tables).
InitialShares: TypeAlias = Mapping[str, Any]  # noqa: UP040
RowRef: TypeAlias = tuple[str, np.ndarray]  # noqa: UP040 - (precomputed set, row indices)
T = TypeVar("T")
log = logging.getLogger(__name__)


class PartyCrypto:
    """One party's key pair, its Paillier contexts (own and peers'), and its matmul pool.

    Which obfuscators: the own context only makes fresh encryptions, all of them for the
    other party (initial shares, m3 and the Embed-MatMul counterparts), so its pool uses
    short exponents when `config.fresh_obfuscators` is "short" and the key has h_s. A
    peer's context makes everything that goes to that peer, the key's owner (m1, m2, e,
    c, z, y, de, the pair seeds): statistical obfuscators, always.
    """

    def __init__(
        self, party_id: str, config: SecureConfig, keypair: KeyPair | None, own_pool: bool
    ) -> None:
        """`own_pool`: keep a pool of obfuscators for our own key (the active party
        encrypts every backward step; a passive party of the MatMul layer only at setup).

        Raises:
            PaillierKeyError: no key pair given and `config.key_bits` is below the minimum.
        """
        self.config = config
        self.keypair = keypair or generate_keypair(party_id, config)
        self._idle = Gate()  # open while this party waits for a peer
        public, private = self.keypair.public, self.keypair.private
        short = config.fresh_obfuscators == "short"
        if short and public.h_s is None:
            log.info("party %s: its key has no h_s; statistical obfuscators only", party_id)
            short = False
        if own_pool:
            pool = self._pool(public, private, short)
        else:  # no background work; tables only once they pay (`ObfuscatorPool`)
            pool = ObfuscatorPool(
                public, private, 0, config.threads, False, config.obfuscator, short_exponent=short
            )
        self.own = Paillier(
            public, private, pool, config.threads, counts=config.counts, executor=config.executor
        )
        self.matmul = CipherMatmul(
            config.workers,
            config.parallel_min_terms,
            counts=config.counts,
            executor=config.executor,
        )
        self.peers: dict[str, Paillier] = {}
        self._saved_tables: dict[str, SavedTable] = {}  # for peers not added yet

    def _pool(
        self,
        public: PublicKey,
        private: PrivateKey | None,
        short: bool = False,
        gate: Gate | None = None,
    ) -> ObfuscatorPool:
        """A pool for repeated use (with `obfuscator_pool` > 0 it builds its fixed-base
        tables at its first use; `add_peer` builds a peer's at once)."""
        return repeated_use_pool(self.config, public, private, gate or self._idle, short)

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """Mark a wait for a peer message: background refills may use the CPU meanwhile
        (of this party's pools, and of the kept ones it uses, the executor's `pools`)."""
        kept = self._kept
        with self._idle.held(), kept.gate.held() if kept is not None else nullcontext():
            if self.config.background_refill:
                for context in [self.own, *self.peers.values()]:
                    context.pool.refill_in_background()
            yield

    def add_peer(self, key: PublicKey) -> Paillier:
        """A public-key context (with its own obfuscator pool) for a peer's key; the
        pool's fixed-base table is the one `restore_tables` saved for this key, else a
        new one; either is made ready now (if pools are configured).

        Raises:
            StateError: the table saved for this key does not fit it.
        """
        saved = self._saved_tables.pop(key.owner, None)
        if saved is not None and saved.key.n != key.n:
            saved = None
        kept = self._kept
        if kept is not None:  # kept across jobs; restored only when it is new
            pool = kept.pool(key, lambda gate: _restored(self._pool(key, None, gate=gate), saved))
        else:
            pool = _restored(self._pool(key, None), saved)
        if self.config.obfuscator_pool:
            pool.prepare()  # ready (and its helpers started) before the first step
        if kept is not None and self.config.background_refill:
            pool.refill_in_background()  # a kept pool fills whenever its gate opens
        context = Paillier(
            key, None, pool, self.config.threads, self.config.counts, self.config.executor
        )
        self.peers[key.owner] = context
        return context

    @property
    def _kept(self) -> PoolCache | None:
        """The party's pools kept across jobs (its executor's), if its peers' pools come
        from there (not with `obfuscator_pool` 0: those are made per use)."""
        executor = self.config.executor
        if executor is None or not self.config.obfuscator_pool:
            return None
        return executor.pools

    def tables_state(self) -> LayerState:
        """The secret bases of this party's fixed-base obfuscator tables (own key and
        peers'), as plain values for its own checkpoints and models only."""
        contexts = [self.own, *self.peers.values()]
        return tables_state(
            {c.pk.owner: (c.pk, c.pool.bases) for c in contexts if c.pool.bases is not None}
        )

    def restore_tables(self, state: LayerState | None) -> None:
        """Use the tables of a `tables_state()` instead of building new ones: our own
        pool's now, a peer's when `add_peer` adds that key. None (a state written before
        tables were saved): build them as usual.

        Raises:
            StateError: the saved tables are malformed or do not fit our key.
        """
        if state is None:
            return
        self._saved_tables = tables_from_state(state)
        own = self._saved_tables.pop(self.keypair.public.owner, None)
        if own is not None and own.key.n == self.keypair.public.n:
            _restore(self.own.pool, own)

    def fill_pools(self) -> None:
        """Fill every obfuscator pool to capacity now (blocks)."""
        for context in [self.own, *self.peers.values()]:
            context.pool.fill()

    def close(self) -> None:
        """Stop background refills and the process pool (the kept pools stay, with the
        party's `PoolCache`)."""
        kept = self._kept
        for context in [self.own, *self.peers.values()]:
            if kept is None or context is self.own:
                context.pool.close()
        self.matmul.close()


def repeated_use_pool(
    config: SecureConfig,
    public: PublicKey,
    private: PrivateKey | None,
    gate: Gate,
    short: bool = False,
) -> ObfuscatorPool:
    """An obfuscator pool as `config` sets them up for a job, refilling while `gate` is open."""
    return ObfuscatorPool(
        public,
        private,
        config.obfuscator_pool,
        config.threads,
        config.background_refill,
        config.obfuscator,
        gate,
        config.obfuscator_helpers,
        short_exponent=short,
    )


def keep_saved_tables(pools: PoolCache, part: Mapping[str, Any], me: str) -> list[str]:
    """Keep pools (`pools`, filled while the party idles) for the peers' keys whose
    fixed-base tables a stored model part or checkpoint of party `me` saved, in any of
    its layers (their `obfuscators` state); the keys' owners.

    Raises:
        StateError: the saved tables are malformed or do not fit their keys.
    """
    config = SecureConfig()  # every job's pools are made with these settings
    owners = []
    for layer in part.values():
        if not isinstance(layer, Mapping) or not isinstance(layer.get("obfuscators"), Mapping):
            continue
        for owner, saved in tables_from_state(layer["obfuscators"]).items():
            if owner == me:
                continue
            pools.pool(saved.key, partial(_saved_pool, config, saved))
            owners.append(owner)
    return owners


def _saved_pool(config: SecureConfig, saved: SavedTable, gate: Gate) -> ObfuscatorPool:
    """A peer-key pool as `config` sets them up, sampling from a saved table."""
    return _restored(repeated_use_pool(config, saved.key, None, gate), saved)


def _restored(pool: ObfuscatorPool, saved: SavedTable | None) -> ObfuscatorPool:
    """`pool`, sampling from the `saved` table's bases if given.

    Raises:
        StateError: they do not fit its key.
    """
    if saved is not None:
        _restore(pool, saved)
    return pool


def _restore(pool: ObfuscatorPool, saved: SavedTable) -> None:
    try:
        pool.restore(saved.bases)
    except ConfigError as exc:
        raise StateError(f"{exc}; the checkpoint or model is corrupt") from None


def check_features(x: Features, in_dim: int, rows: int | None = None) -> Features:
    """Check a feature batch (dense 2-D array or scipy sparse); sparse becomes CSR.

    Raises:
        InputError: wrong type, shape, or NaN/infinite values.
    """
    if sp.issparse(x):
        x = sp.csr_matrix(x, dtype=np.float64)
        values = np.asarray(x.data)
    else:
        x = np.asarray(x, dtype=np.float64)
        values = x
    if x.ndim != 2 or x.shape[1] != in_dim or (rows is not None and x.shape[0] != rows):
        want = f"({rows if rows is not None else 'N'}, {in_dim})"
        raise InputError(f"features must have shape {want}, got {x.shape}")
    if not np.all(np.isfinite(values)):
        raise InputError("features contain NaN or infinite values; clean them first")
    return x


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
    return [value for row in rows for value in row]


def shaped(values: Sequence[T], cols: int) -> list[list[T]]:
    return [list(values[i : i + cols]) for i in range(0, len(values), cols)]


def send_cipher(channel: Channel, peer: str, tag: str, matrix: CipherMatrix) -> None:
    channel.send(peer, tag, ciphertexts_to_payload(matrix))


def recv_cipher(
    channel: Channel,
    peer: str,
    tag: str,
    key: PublicKey,
    shape: tuple[int | None, int | None],
    slots: int,
    scale_bits: int,
    timeout: float | None,
    *,
    crypto: PartyCrypto | None = None,
) -> CipherMatrix:
    """Receive and check a ciphertext matrix (see `ciphertexts_from_payload`); with
    `crypto`, its obfuscator pools may refill in the background during the wait.

    Raises:
        PayloadError: the payload is not what this step expects.
        ChannelError: nothing arrived in time, or the job was closed.
    """
    with crypto.waiting() if crypto is not None else nullcontext():
        payload = channel.recv(peer, tag, timeout)
    return ciphertexts_from_payload(payload, key, shape=shape, slots=slots, scale_bits=scale_bits)


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


def check_lr(lr: float) -> None:
    """Raises:
    InputError: lr is not a positive finite number.
    """
    if not (np.isfinite(lr) and lr > 0):
        raise InputError(f"lr must be a positive finite number, got {lr}")


def check_step(grad: np.ndarray, lr: float, shape: tuple[int, int]) -> np.ndarray:
    """lr * grad, checked (B's step before it is encrypted into m3).

    Raises:
        InputError: wrong shape, non-finite values or a non-positive lr.
    """
    g = np.asarray(grad, dtype=np.float64)
    if g.shape != shape:
        raise InputError(f"grad_z must have shape {shape}, got {g.shape}")
    if not (np.isfinite(lr) and lr > 0) or not np.all(np.isfinite(g)):
        raise InputError("lr must be a positive number and grad_z finite")
    return lr * g


def check_passive_ids(channel: Channel, passive_ids: Sequence[str]) -> list[str]:
    """The active party's list of passive parties, checked.

    Raises:
        ConfigError: no passive party, a duplicate, or the active party itself among them.
    """
    ids = list(passive_ids)
    if not ids or len(set(ids)) != len(ids) or channel.party_id in ids:
        raise ConfigError(f"passive_ids must be distinct other parties, got {ids}")
    return ids


def check_init(init: InitialShares | None, name: str, shape: tuple[int, ...]) -> np.ndarray | None:
    """A test-supplied initial share, shape-checked, or None.

    Raises:
        InputError: wrong shape or non-finite values.
    """
    if not init or name not in init:
        return None
    value = np.asarray(init[name], dtype=np.float64)
    if value.shape != shape or not np.all(np.isfinite(value)):
        raise InputError(f"init['{name}'] must be a finite array of shape {shape}")
    return value.copy()


def initial_share(
    init: InitialShares, name: str, rows: int, out_dim: int, rng: np.random.Generator
) -> np.ndarray:
    """A share of a weight matrix (rows x out_dim): `init[name]` (tests) or `sample_share`.

    Raises:
        InputError: `init[name]` has the wrong shape or non-finite values.
    """
    value = check_init(init, name, (rows, out_dim))
    return sample_share(rng, rows, out_dim) if value is None else value


def check_active_key_bits(active_key_bits: int, config: SecureConfig) -> None:
    """A passive party's check of the key size in the active party's layer parameters.

    Raises:
        PayloadError: the active party uses another key size than this party.
    """
    if active_key_bits != config.key_bits:
        raise PayloadError(
            f"the active party uses {active_key_bits}-bit keys, this party "
            f"{config.key_bits}; set the same SecureConfig.key_bits everywhere"
        )


class LayerRole:
    """What every role of a source layer holds: its channel, configuration, job seed,
    test-only initial shares and crypto bundle; and the controls of its background work."""

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

    def fill_obfuscator_pools(self) -> None:
        """Precompute the r^n obfuscators of coming steps now (blocks until full)."""
        self._crypto.fill_pools()

    def close(self) -> None:
        """Stop background work (obfuscator refills, matmul processes)."""
        self._crypto.close()
