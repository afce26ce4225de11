"""`RayExecutor`: a party's executor over its own Ray cluster (`compute.executor: ray`).

The daemon joins the cluster as a driver at the first job (`connect()`: an unreachable
cluster fails that job before training starts). `share` puts a value into the cluster's
object store once (`ray.put`); every task gets the reference, so key material and tables
cross to each node once per job, never per task. Ray reruns a task whose worker process
dies (`max_retries`). Ray is an optional extra (`pip install -e ".[ray]"`), imported
only here and only when a config asks for it (`import_ray`).
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from vfl.secure.errors import ExecutorError
from vfl.secure.executor.base import B, BlockExecutor, R, S, Shared

RAY_INSTALL = 'pip install -e ".[ray]"'
log = logging.getLogger(__name__)


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
        ray = import_ray()
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


def import_ray() -> Any:
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
