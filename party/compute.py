"""A party's compute: the executor its jobs share, and the obfuscator pools it keeps.

The executor (`secure.executor`, made from the config's `compute:`) runs the Paillier work
of every job and scoring session; a Ray one joins its cluster at the first job. With
`compute.kept_keys`, it keeps obfuscator pools for the peers' keys (`PoolCache`), which
fill while no job runs, starting with the keys of the newest blindfl models the party
holds, so that the first prediction after a restart finds them filled.
"""

from __future__ import annotations

import logging
import threading

from vfl.party.config import PartyConfig
from vfl.party.errors import JobError, PartyError
from vfl.party.state import StateDir
from vfl.party.state.model_store import ModelStore
from vfl.secure.errors import ExecutorError, SecureError
from vfl.secure.executor import BlockExecutor, make_executor
from vfl.secure.paillier.pool_cache import PoolCache
from vfl.secure.source_layers.crypto import keep_saved_tables

log = logging.getLogger(__name__)


class PartyCompute:
    """The executor of one party daemon, with its kept obfuscator pools (if configured)."""

    def __init__(self, config: PartyConfig, state: StateDir | None) -> None:
        self.party_id = config.party_id
        self.executor = make_executor(config.compute)
        compute = config.compute
        if compute.kept_keys:
            self.executor.pools = PoolCache(compute.kept_keys, compute.kept_obfuscators)
        self.idle(True)
        if self.executor.pools is not None and state is not None:
            threading.Thread(
                target=self._keep_model_pools, args=(state,), name="kept-pools", daemon=True
            ).start()

    def idle(self, idle: bool) -> None:
        """Open (no job runs) or close the gate of the kept obfuscator pools' refills."""
        if self.executor.pools is not None:
            self.executor.pools.set_idle(idle)

    def ready_counts(self) -> dict[str, int]:
        """The kept obfuscators ready, by key owner (none without kept pools)."""
        pools = self.executor.pools
        return {} if pools is None else pools.ready_counts()

    def close(self) -> None:
        """Release the executor (its local processes, or its Ray connection) and the kept
        obfuscator pools (their refills and helper processes)."""
        if self.executor.pools is not None:
            self.executor.pools.close()
        self.executor.close()

    def _keep_model_pools(self, state: StateDir) -> None:
        """Keep the obfuscator pools of the newest blindfl models' peer keys (they fill
        while no job runs)."""
        pools, me = self.executor.pools, self.party_id
        assert pools is not None
        store = ModelStore(state)
        newest = [m for m in store.list() if m.protocol == "blindfl"][-pools.keys :]
        for manifest in newest:  # oldest first: the newest ends most recently used
            try:
                _, part = store.load(manifest.model_id, me)
                owners = keep_saved_tables(pools, part, me)
            except (PartyError, SecureError) as exc:
                log.warning("party %s: model %s: no kept pools (%s)", me, manifest.model_id, exc)
                continue
            log.info("party %s: keeps obfuscators for %s (%s)", me, owners, manifest.model_id)


def connect(executor: BlockExecutor, party_id: str) -> None:
    """Make sure the party's executor can run tasks (joins its Ray cluster).

    Raises:
        JobError: it cannot (names the party and the fix, not the cluster's address).
    """
    try:
        executor.connect()
    except ExecutorError as exc:
        raise JobError(f"party '{party_id}': {exc}") from None


def log_tasks(executor: BlockExecutor | None, party_id: str) -> None:
    if executor is not None:
        log.info("party %s: %s executor, %d tasks so far", party_id, executor.name, executor.tasks)
