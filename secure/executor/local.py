"""`LocalExecutor`: a party's executor over this machine's cores (`compute.executor: local`).

A process pool of "spawn" processes, started at the first parallel map, each ending with
the daemon even when it is killed (`secure.executor.lifeline`); a single block, or every block
with one worker, runs in-process. A large shared array (an obfuscator
table) goes into shared memory once instead of into every task: `share` puts each numpy
array of 1 MiB or more there, and a worker attaches it read-only in its handle's place.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from dataclasses import dataclass
from functools import partial
from multiprocessing.shared_memory import SharedMemory
from typing import Any

import numpy as np
from vfl.secure.executor.base import B, BlockExecutor, R, S, Shared
from vfl.secure.executor.lifeline import watch_parent

_SHARED_MEMORY_BYTES = 1 << 20  # arrays from this size are shared, not sent per task
log = logging.getLogger(__name__)


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
            self._pool = ProcessPoolExecutor(
                self.workers,
                mp_context=context,
                initializer=watch_parent,  # a worker ends with its daemon, even at SIGKILL
                initargs=(os.getpid(),),
            )
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
