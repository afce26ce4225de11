"""One party's crypto bundle for its source layers, and the obfuscator pools it draws on.

`PartyCrypto` holds the party's key pair, the Paillier contexts of its own key and of
its peers' keys (each with its obfuscator pool) and its ciphertext matrix products. A
pool of a peer's key comes from the party's executor when it keeps pools across jobs
(`secure.paillier.pool_cache`), and may sample from a fixed-base table saved in the
party's checkpoint or model (`restore_tables`, `keep_saved_tables`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from functools import partial
from typing import Any

from vfl.secure.config import SecureConfig
from vfl.secure.errors import ConfigError, StateError
from vfl.secure.paillier.cipher_matmul import CipherMatmul
from vfl.secure.paillier.engine import Paillier
from vfl.secure.paillier.gate import Gate
from vfl.secure.paillier.keys import KeyPair, PrivateKey, PublicKey, generate_keypair
from vfl.secure.paillier.obfuscators import ObfuscatorPool
from vfl.secure.paillier.pool_cache import PoolCache
from vfl.secure.source_layers.state import LayerState, SavedTable, tables_from_state, tables_state

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
    """Raises:
    StateError: the saved bases do not fit the pool's key.
    """
    try:
        pool.restore(saved.bases)
    except ConfigError as exc:
        raise StateError(f"{exc}; the checkpoint or model is corrupt") from None
