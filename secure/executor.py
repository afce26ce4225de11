"""Where one party's heavy homomorphic work runs: the executor seam.

Decryptions, packed ciphertext-matrix products, re-randomisations and PSI blindings are
independent by row block. The secure layer never runs them itself: it asks the party's
`BlockExecutor` to share a value once (a private key, a modulus, an obfuscator table, a
PSI scalar) and to map a task function of `secure.paillier.blocks` (or
`secure.psi.curve.blind_blob`) over blocks, and gets the results back in order, as
bytes (`start` runs one task without waiting, for PSI's point stream):

    shared = executor.share(private_key)                   # once per job
    spans = executor.split(len(cts), executor.block_items(DECRYPT, key_bits))
    blobs = [blob(cts[lo:hi], width) for lo, hi in spans]
    results = executor.map(decrypt_block, shared, blobs)   # one task per block

How much work one task gets: `compute.min_task_ms`, one number for every operation,
turned into items per task by a cost model (`OP_COSTS_MS`, one-core milliseconds per
item at 2048 bits, measured by bench/scale_out.py, scaled with the key size): the same
setting (20 ms) gives a decryption task 8 ciphertexts and a product task 1,112 nonzero terms,
so a training batch's few hundred decryptions reach a cluster with many CPUs while small
products stay in one task. Callers keep work under two tasks' worth in their own process.

Two engines, chosen by the party config's `compute:` section (`ComputeConfig`), never by
a job spec, because the machines belong to the party:

- `local` (the default): a process pool over this machine's cores ("spawn" processes,
  started at the first parallel map); a single block runs in-process. A large shared
  array (an obfuscator table) goes into shared memory once instead of into every task.
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
import math
import multiprocessing
import os
import socket
import threading
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from dataclasses import dataclass
from functools import partial
from multiprocessing.shared_memory import SharedMemory
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np
from vfl.secure.errors import ConfigError, ExecutorError

if TYPE_CHECKING:  # pool_cache -> keys -> config -> this module
    from vfl.secure.paillier.pool_cache import PoolCache

EXECUTORS = ("local", "ray")
_SHARED_MEMORY_BYTES = 1 << 20  # local: arrays from this size are shared, not sent per task
MAX_TASK_MS = 60_000.0  # a minute: more would keep a whole job in one task
RAY_INSTALL = 'pip install -e ".[ray]"'
S = TypeVar("S")
B = TypeVar("B")
R = TypeVar("R")
log = logging.getLogger(__name__)


# Operations a task can do, and one-core milliseconds per item at 2048 bits
# (bench/results/scale_out.txt: decryption 2.71 ms, full r^n 9.46 ms, a product mod n^2
# 6 us with ~3 per nonzero 8-bit term; a worker's table sample times a ciphertext, 276
# products read from the shared array, 1.62 ms against the pool's own 1.44 ms in one
# run; an X25519 blinding 32 us, secure.psi.curve) and the power of key_bits / 2048 each
# scales with (exponent length x product cost).
DECRYPT = "decrypt"  # one ciphertext decrypted by CRT
PRODUCT_TERM = "product term"  # one nonzero term of a ciphertext matrix product
RERANDOMIZE_FULL = "rerandomize (full)"  # c * r^n with a full exponentiation
RERANDOMIZE_TABLE = "rerandomize (table)"  # c * r^n from a fixed-base table
PSI_POINT = "psi point"  # one X25519 blinding of a PSI id (secure.psi.curve; no key size)
OP_COSTS_MS = {
    DECRYPT: 2.7,
    PRODUCT_TERM: 0.018,
    RERANDOMIZE_FULL: 9.5,
    RERANDOMIZE_TABLE: 1.6,
    PSI_POINT: 0.032,
}
_COST_POWERS = {
    DECRYPT: 3,
    PRODUCT_TERM: 2,
    RERANDOMIZE_FULL: 3,
    RERANDOMIZE_TABLE: 3,
    PSI_POINT: 0,
}


def op_cost_ms(op: str, key_bits: int = 2048) -> float:
    """Estimated one-core milliseconds of one item of `op` under a `key_bits` Paillier
    key (PSI points do not depend on it)."""
    return OP_COSTS_MS[op] * (key_bits / 2048) ** _COST_POWERS[op]


@dataclass(frozen=True)
class ComputeConfig:
    """A party's compute: the party config's `compute:` section.

    Attributes:
        executor: "local" (this machine's cores) or "ray" (the party's Ray cluster).
        address: ray only: HOST:PORT of the cluster's head (`ray start --head --port`).
        min_task_ms: the least work, in one-core milliseconds, one task gets (the same
            for every operation: `BlockExecutor.block_items` turns it into ciphertexts
            per decryption or re-randomisation task and nonzero terms per product task);
            smaller work stays in one task. 20 ms keeps Ray's ~1.75 ms per task near 10%
            of the work (bench/scale_out.py).
        workers: local only: processes (None: all cores; 1: everything in-process).
        max_retries: ray only: times a task is rerun when its worker process dies.
        kept_keys: peers' keys whose obfuscator pools the daemon keeps across jobs
            (`secure.paillier.pool_cache`; ~36 MB of tables each at 2048 bits; 0: none).
        kept_obfuscators: obfuscators each kept pool fills up to while the daemon idles
            (512 bytes each at 2048 bits; one per ciphertext sent to the key's owner).
    """

    executor: str = "local"
    address: str | None = None
    min_task_ms: float = 20.0
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
            (
                isinstance(self.min_task_ms, int | float)
                and not isinstance(self.min_task_ms, bool)
                and 0 < self.min_task_ms <= MAX_TASK_MS,
                f"compute.min_task_ms must be a number of milliseconds in (0, {MAX_TASK_MS}]",
            ),
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


@dataclass(frozen=True)
class _SharedArray:
    """A handle to an array a `LocalExecutor` put into shared memory (what its tasks
    get in the array's place)."""

    name: str
    shape: tuple[int, ...]
    dtype: str


class _LocalShared(Shared[S]):
    """A value whose large arrays sit in shared memory: `value` holds their handles,
    `inline` the value itself (for blocks run in-process); the memory is released when
    this object goes."""

    def __init__(self, value: Any, inline: S, segments: list[SharedMemory]) -> None:
        super().__init__(value)
        self.inline = inline
        self._finalizer = weakref.finalize(self, _release, segments)


class BlockExecutor(ABC):
    """The seam: `share` a value once, `map` a task function over blocks."""

    name = "base"

    # whether decryptions and re-randomisations leave the daemon (`Paillier`); products
    # and PSI blindings always go to the executor when large enough
    spreads_paillier = True

    def __init__(self, min_task_ms: float) -> None:
        self.min_task_ms = min_task_ms
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

    @abstractmethod
    def start(self, fn: Callable[[S, B], R], shared: Shared[S], block: B) -> Future[R]:
        """Start one task, fn(value, block), without waiting (a stream of blocks: PSI)."""

    def block_items(self, op: str, key_bits: int = 2048) -> int:
        """The fewest items of `op` (one of `OP_COSTS_MS`) one task gets under a
        `key_bits` Paillier key: `min_task_ms` of work by the cost model."""
        return max(1, math.ceil(self.min_task_ms / op_cost_ms(op, key_bits)))

    def split(self, items: int, min_items: int) -> list[tuple[int, int]]:
        """[lo, hi) ranges cutting `items` into at most `slots` blocks of at least
        `min_items` items each."""
        count = max(1, min(self.slots, items // max(1, min_items)))
        edges = [items * i // count for i in range(count + 1)]
        return list(zip(edges[:-1], edges[1:], strict=True))

    def close(self) -> None:  # noqa: B027 - a no-op unless an engine needs it
        """Release the workers (local) or leave the cluster (ray)."""


class LocalExecutor(BlockExecutor):
    """A process pool over this machine's cores; one block runs in-process.

    On one machine, decryptions stay in the daemon by default (`spread_paillier`
    False): their exponentiations release the GIL, so the daemon's threads use every core
    without copying a ciphertext, and re-randomisations come from its obfuscator pools
    and their helper processes (measured on the credit shape: an epoch 41 s that way, 49 s
    with both sent to this pool). Products (GIL-bound) and PSI blindings use the pool."""

    name = "local"

    def __init__(
        self, workers: int | None = None, min_task_ms: float = 20.0, spread_paillier: bool = False
    ) -> None:
        """`spread_paillier`: send decryptions and re-randomisations to the pool too (as a
        cluster gets them)."""
        super().__init__(min_task_ms)
        self.spreads_paillier = spread_paillier
        self.workers = max(1, workers or os.cpu_count() or 1)
        self._pool: Executor | None = None
        self._finalizer: Callable[[], object] | None = None  # a weakref.finalize

    @property
    def slots(self) -> int:
        return self.workers

    def share(self, value: S) -> Shared[S]:
        """The value as tasks get it; numpy arrays of 1 MiB or more (the value, or items
        of a tuple value) go into shared memory once rather than into every task (unless
        /dev/shm is too small: then they go with each task)."""
        if self.workers == 1:
            return Shared(value)
        segments: list[SharedMemory] = []

        def place(array: np.ndarray) -> np.ndarray | _SharedArray:
            if array.nbytes < _SHARED_MEMORY_BYTES or not _shared_memory_room(array.nbytes):
                return array
            segment = SharedMemory(create=True, size=array.nbytes)
            segments.append(segment)
            np.ndarray(array.shape, array.dtype, buffer=segment.buf)[...] = array
            return _SharedArray(segment.name, array.shape, array.dtype.str)

        handles = _replace(value, np.ndarray, place)
        return _LocalShared(handles, value, segments) if segments else Shared(value)

    def map(self, fn: Callable[[S, B], R], shared: Shared[S], blocks: Sequence[B]) -> list[R]:
        self.tasks += len(blocks)
        if len(blocks) <= 1 or self.workers == 1:
            value = _in_process(shared)
            return [fn(value, block) for block in blocks]
        return list(self.pool().map(_in_worker(fn, shared), [shared.value] * len(blocks), blocks))

    def start(self, fn: Callable[[S, B], R], shared: Shared[S], block: B) -> Future[R]:
        self.tasks += 1
        if self.workers == 1:
            done: Future[R] = Future()
            try:
                done.set_result(fn(_in_process(shared), block))
            except Exception as exc:  # noqa: BLE001 - handed to the caller, as a pool would
                done.set_exception(exc)
            return done
        return self.pool().submit(_in_worker(fn, shared), shared.value, block)

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

    def __init__(self, address: str, min_task_ms: float = 20.0, max_retries: int = 3) -> None:
        super().__init__(min_task_ms)
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

    def start(self, fn: Callable[[S, B], R], shared: Shared[S], block: B) -> Future[R]:
        future: Future[R] = self.submit(fn, shared, [block])[0].future()
        return future

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
        return RayExecutor(config.address, config.min_task_ms, config.max_retries)
    return LocalExecutor(config.workers, config.min_task_ms)


def _replace(value: Any, kind: type, fn: Callable[[Any], Any]) -> Any:
    """`value` with `fn` applied to it if it is a `kind`, else to its items of that kind
    if it is a tuple (a named one keeps its type)."""
    if isinstance(value, kind):
        return fn(value)
    if isinstance(value, tuple):
        items = [fn(item) if isinstance(item, kind) else item for item in value]
        return value._make(items) if hasattr(value, "_make") else tuple(items)
    return value


def _in_process(shared: Shared[S]) -> S:
    """The value a block run in this process gets (the original, not shared memory)."""
    value: S = shared.inline if isinstance(shared, _LocalShared) else shared.value
    return value


def _in_worker(fn: Callable[[S, B], R], shared: Shared[S]) -> Callable[[Any, B], R]:
    """What a local worker runs on (shared.value, block): `fn`, with any shared-memory
    arrays attached first."""
    return partial(_attached, fn) if isinstance(shared, _LocalShared) else fn


def _attached(fn: Callable[[Any, B], R], value: Any, block: B) -> R:
    """In a local worker: `fn(value, block)` with the shared-memory arrays of `value`
    attached in their handles' place (read in place, not copied)."""
    segments: list[SharedMemory] = []

    def attach(handle: _SharedArray) -> np.ndarray:
        segment = SharedMemory(handle.name)
        segments.append(segment)
        array = np.ndarray(handle.shape, np.dtype(handle.dtype), buffer=segment.buf)
        array.flags.writeable = False
        return array

    arguments = _replace(value, _SharedArray, attach)
    try:
        return fn(arguments, block)
    finally:
        del arguments
        for segment in segments:
            try:
                segment.close()
            except BufferError:  # the task kept a view: its mapping goes with it
                pass


def _shared_memory_room(nbytes: int) -> bool:
    """Whether /dev/shm has room for `nbytes` twice over (a container's default is 64
    MB, and writing past a full tmpfs kills the process); elsewhere assume so."""
    try:
        stats = os.statvfs("/dev/shm")
    except OSError:
        return True
    if stats.f_bavail * stats.f_frsize >= 2 * nbytes:
        return True
    log.warning(
        "no room in /dev/shm for a %d MB shared value; it goes with every task instead "
        "(give the daemon's container more shared memory, e.g. shm_size)",
        nbytes >> 20,
    )
    return False


def _release(segments: list[SharedMemory]) -> None:
    for segment in segments:
        segment.close()
        segment.unlink()


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
