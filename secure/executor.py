"""Where one party's heavy homomorphic work runs: the executor seam.

Decryptions and packed ciphertext-matrix products are independent by row block. The
secure layer never runs them itself: it asks the party's `BlockExecutor` to share a
value once (a private key, a modulus) and to map a task function of
`secure.paillier.blocks` over blocks, and gets the results back in order, as bytes:

    shared = executor.share(private_key)                   # once per job
    results = executor.map(decrypt_block, shared, blobs)   # one task per block

Two engines, chosen by the party config's `compute:` section (`ComputeConfig`), never by
a job spec, because the machines belong to the party:

- `local` (the default): a process pool over this machine's cores ("spawn" processes,
  started at the first parallel map); a single block runs in-process.
- `ray`: the party's own Ray cluster, which the daemon joins as a driver at the first
  job (`connect()`: an unreachable cluster fails that job before training starts).
  `share` puts the value into the cluster's object store once (`ray.put`); every task
  gets the reference, so key material and tables cross to each node once per job, never
  per task. Tasks are retried by Ray when a worker process dies (`max_retries`).
  Ray is an optional extra (`pip install -e ".[ray]"`), imported only here and only when
  a config asks for it.

Only the party's own values and the functions' own byte blobs cross to workers; nothing
received from a peer is unpickled. A party's private key reaches only its own cluster
(docs/security.md, Executors). Cross-party traffic stays on the daemons' gRPC.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import socket
import threading
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from secure.errors import ConfigError, ExecutorError

if TYPE_CHECKING:  # pool_cache -> keys -> config -> this module
    from secure.paillier.pool_cache import PoolCache

EXECUTORS = ("local", "ray")
RAY_INSTALL = 'pip install -e ".[ray]"'
S = TypeVar("S")
B = TypeVar("B")
R = TypeVar("R")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ComputeConfig:
    """A party's compute: the party config's `compute:` section.

    Attributes:
        executor: "local" (this machine's cores) or "ray" (the party's Ray cluster).
        address: ray only: HOST:PORT of the cluster's head (`ray start --head --port`).
        min_block: the fewest items (ciphertexts to decrypt, nonzero terms of a product)
            one task gets; smaller work stays in one task (bench/scale_out.py measures
            where Ray's per-task overhead drops below 10% of the work).
        workers: local only: processes (None: all cores; 1: everything in-process).
        max_retries: ray only: times a task is rerun when its worker process dies.
        kept_keys: peers' keys whose obfuscator pools the daemon keeps across jobs
            (`secure.paillier.pool_cache`; ~36 MB of tables each at 2048 bits; 0: none).
        kept_obfuscators: obfuscators each kept pool fills up to while the daemon idles
            (512 bytes each at 2048 bits; one per ciphertext sent to the key's owner).
    """

    executor: str = "local"
    address: str | None = None
    min_block: int = 2_000
    workers: int | None = None
    max_retries: int = 3
    kept_keys: int = 4
    kept_obfuscators: int = 4_096

    def __post_init__(self) -> None:
        """Raises:
        ConfigError: an unknown executor, ray without an address, a bound out of range.
        """
        checks = [
            (self.executor in EXECUTORS, f"compute.executor must be one of {EXECUTORS}"),
            (
                self.executor != "ray" or bool(self.address),
                "compute.executor 'ray' needs compute.address: HOST:PORT of the cluster head",
            ),
            (self.min_block >= 1, "compute.min_block must be >= 1"),
            (self.workers is None or self.workers >= 1, "compute.workers must be >= 1"),
            (self.max_retries >= 0, "compute.max_retries must be >= 0"),
            (self.kept_keys >= 0, "compute.kept_keys must be >= 0"),
            (self.kept_obfuscators >= 0, "compute.kept_obfuscators must be >= 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)


class Shared(Generic[S]):
    """A value sent to the executor's workers once: the value itself (local) or its
    object-store reference (ray)."""

    def __init__(self, value: Any) -> None:
        self.value = value


class BlockExecutor(ABC):
    """The seam: `share` a value once, `map` a task function over blocks."""

    name = "base"

    def __init__(self, min_block: int) -> None:
        self.min_block = min_block
        self.tasks = 0  # tasks mapped so far (in-process ones included)
        # the party's obfuscator pools for peers' keys, kept across jobs like the workers
        # (`secure.paillier.pool_cache`; set by the party daemon, None: per-job pools)
        self.pools: PoolCache | None = None

    @property
    @abstractmethod
    def slots(self) -> int:
        """How many tasks run at once."""

    def connect(self) -> None:  # noqa: B027 - a no-op unless an engine needs it
        """Make sure the engine can run tasks (a no-op for local).

        Raises:
            ExecutorError: the engine is not installed or its cluster is unreachable.
        """

    @abstractmethod
    def share(self, value: S) -> Shared[S]:
        """Send `value` to the workers once; pass the handle to `map`."""

    @abstractmethod
    def map(self, fn: Callable[[S, B], R], shared: Shared[S], blocks: Sequence[B]) -> list[R]:
        """[fn(value, block) for block in blocks], spread over the workers."""

    def split(self, items: int, min_block: int | None = None) -> list[tuple[int, int]]:
        """[lo, hi) ranges cutting `items` into at most `slots` blocks of at least
        `min_block` (default: the configured one) items each."""
        count = max(1, min(self.slots, items // (min_block or self.min_block)))
        edges = [items * i // count for i in range(count + 1)]
        return list(zip(edges[:-1], edges[1:], strict=True))

    def close(self) -> None:  # noqa: B027 - a no-op unless an engine needs it
        """Release the workers (local) or leave the cluster (ray)."""


class LocalExecutor(BlockExecutor):
    """A process pool over this machine's cores; one block runs in-process."""

    name = "local"

    def __init__(self, workers: int | None = None, min_block: int = 2_000) -> None:
        super().__init__(min_block)
        self.workers = max(1, workers or os.cpu_count() or 1)
        self._pool: Executor | None = None
        self._finalizer: Callable[[], object] | None = None  # a weakref.finalize

    @property
    def slots(self) -> int:
        return self.workers

    def share(self, value: S) -> Shared[S]:
        return Shared(value)

    def map(self, fn: Callable[[S, B], R], shared: Shared[S], blocks: Sequence[B]) -> list[R]:
        self.tasks += len(blocks)
        if len(blocks) <= 1 or self.workers == 1:
            return [fn(shared.value, block) for block in blocks]
        return list(self.pool().map(fn, [shared.value] * len(blocks), blocks))

    def pool(self) -> Executor:
        """The process pool, started at its first use ("spawn": safe beside gRPC threads,
        so a script using it needs the `if __name__ == "__main__":` guard)."""
        if self._pool is None:
            context = multiprocessing.get_context("spawn")
            self._pool = ProcessPoolExecutor(self.workers, mp_context=context)
            self._finalizer = weakref.finalize(self, self._pool.shutdown, wait=False)
        return self._pool

    def warm_up(self) -> None:
        """Start the worker processes now rather than at the first large map."""
        if self.workers > 1:
            list(self.pool().map(abs, range(self.workers)))

    def close(self) -> None:
        if self._finalizer is not None:
            self._finalizer()
        self._pool = None
        self._finalizer = None


class RayExecutor(BlockExecutor):
    """The party's own Ray cluster, joined as a driver at `connect()`.

    Ray keeps one connection per process, so one daemon serves one cluster; this object
    is the daemon's and outlives its jobs (a job's shared values are dropped with the
    job's references to them)."""

    name = "ray"

    def __init__(self, address: str, min_block: int = 2_000, max_retries: int = 3) -> None:
        super().__init__(min_block)
        self.address = address
        self.max_retries = max_retries
        self._ray: Any = None
        self._remote: dict[Callable[..., Any], Any] = {}  # task function -> ray remote
        self._slots = 1
        self._lock = threading.Lock()  # jobs prepared at once connect once

    @property
    def slots(self) -> int:
        return self._slots

    def connect(self) -> None:
        with self._lock:
            self._connect()

    def _connect(self) -> None:
        ray = _import_ray()
        if not ray.is_initialized():
            _probe(self.address)  # ray.init itself retries an absent head for minutes
            try:
                ray.init(address=self.address, log_to_driver=False, logging_level=logging.WARNING)
            except Exception as exc:  # noqa: BLE001 - ray raises ConnectionError and others
                log.warning("cannot reach the Ray cluster at %s: %s", self.address, exc)
                raise ExecutorError(
                    "the party's Ray cluster (compute.address in its party config) cannot be "
                    f"reached ({type(exc).__name__}); start it with `ray start --head` or fix "
                    "the address"
                ) from None
        self._ray = ray
        self._slots = max(1, int(ray.cluster_resources().get("CPU", 1)))
        log.info("joined the Ray cluster at %s: %d CPUs", self.address, self._slots)

    def _connected(self) -> Any:
        if self._ray is None:
            self.connect()
        return self._ray

    def share(self, value: S) -> Shared[S]:
        return Shared(self._connected().put(value))

    def map(self, fn: Callable[[S, B], R], shared: Shared[S], blocks: Sequence[B]) -> list[R]:
        return self.gather(self.submit(fn, shared, blocks))

    def submit(self, fn: Callable[[S, B], R], shared: Shared[S], blocks: Sequence[B]) -> list[Any]:
        """Start one task per block; their object references, for `gather`."""
        ray = self._connected()
        remote = self._remote.get(fn)
        if remote is None:
            remote = ray.remote(max_retries=self.max_retries)(fn)
            self._remote[fn] = remote
        self.tasks += len(blocks)
        return [remote.remote(shared.value, block) for block in blocks]

    def gather(self, refs: list[Any]) -> list[Any]:
        """The tasks' results, in order (a task whose worker died is rerun by Ray)."""
        return list(self._connected().get(refs))

    def close(self) -> None:
        if self._ray is not None and self._ray.is_initialized():
            self._ray.shutdown()
        self._ray = None
        self._remote.clear()


def make_executor(config: ComputeConfig) -> BlockExecutor:
    """The executor a party config's `compute:` names (not connected yet).

    Raises:
        ExecutorError: "ray" without Ray installed.
    """
    if config.executor == "ray":
        _import_ray()
        assert config.address is not None  # ComputeConfig checked it
        return RayExecutor(config.address, config.min_block, config.max_retries)
    return LocalExecutor(config.workers, config.min_block)


def _probe(address: str, timeout_s: float = 5.0) -> None:
    """Raises:
    ExecutorError: nothing accepts TCP connections at the head's HOST:PORT."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            pass
    except (OSError, ValueError) as exc:
        log.warning("cannot reach the Ray cluster head at %s: %s", address, exc)
        raise ExecutorError(
            "the party's Ray cluster (compute.address in its party config) cannot be reached: "
            "nothing answers at its head; start it with `ray start --head` or fix the address"
        ) from None


def _import_ray() -> Any:
    """Raises:
    ExecutorError: Ray is not installed."""
    try:
        import ray  # noqa: PLC0415 - optional: only parties whose config names it
    except ImportError:
        raise ExecutorError(
            "the party config asks for compute.executor 'ray' but Ray is not installed in "
            f"this daemon's environment: install it with {RAY_INSTALL} (or pip install ray)"
        ) from None
    return ray
