"""Starting and stopping the coordinator daemon.

The gRPC server is a `grpc.aio` server on an event loop of its own thread (`LoopThread`),
so a client following a job holds no thread (`coordinator.servicer`); callers stay
synchronous: `create_coordinator_server(...)` returns a running `CoordinatorServer`, and
`stop(grace)` ends it. The party health monitor is a thread of its own. With `ui`, the
read-only dashboard (`coordinator.ui`) serves on the same event loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from vfl.coordinator.admission import REGISTER_WAIT_S
from vfl.coordinator.lifecycle import CONTROL_TIMEOUT_S, Lifecycle
from vfl.coordinator.servicer import CoordinatorServicer
from vfl.coordinator.store import JobStore
from vfl.proto import coordinator_pb2_grpc
from vfl.rpc import PeerClients, Tls, bind, make_aio_server
from vfl.secure.pki.rotation import IdentityWatch

if TYPE_CHECKING:
    from vfl.coordinator.ui.server import UiServer

log = logging.getLogger(__name__)
T = TypeVar("T")


class LoopThread:
    """An asyncio event loop running in its own (daemon) thread; synchronous code hands it
    coroutines with `run`."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the loop; wait for and return its result (or raise its error)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        """Cancel what still runs on the loop, stop it and join its thread."""
        self.run(_cancel_tasks())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


async def _cancel_tasks() -> None:
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.get_running_loop().shutdown_asyncgens()


@dataclass
class CoordinatorServer:
    server: grpc.aio.Server
    lifecycle: Lifecycle
    port: int
    health: health.aio.HealthServicer
    clients: PeerClients
    loop: LoopThread
    servicer: CoordinatorServicer
    stopping: threading.Event = field(default_factory=threading.Event)
    monitor: threading.Thread | None = None
    ui: UiServer | None = None  # the dashboard, when asked for

    def stop(self, grace: float = 2.0) -> None:
        """Stop serving: health NOT_SERVING, wait for the monitor and the launch threads, end
        calls still in progress after `grace` seconds, close the store. Idempotent."""
        if self.stopping.is_set():
            return
        self.stopping.set()
        if self.ui is not None:
            self.loop.run(self.ui.stop())
        self.loop.run(self.health.enter_graceful_shutdown())
        if self.monitor is not None:  # its health probes use the clients closed below
            self.monitor.join(timeout=grace + 10)
        self.lifecycle.join(timeout=grace + 10)
        self.loop.run(self._stop_serving(grace))
        self.servicer.pools.shutdown()
        self.loop.close()
        self.clients.close()
        self.lifecycle.store.close()

    async def _stop_serving(self, grace: float) -> None:
        await self.server.stop(grace)
        self.servicer.close()


def _monitor(
    running: CoordinatorServer, interval_s: float, grace_s: float, auto_resume: bool
) -> None:
    while not running.stopping.wait(interval_s):
        try:
            running.lifecycle.check_parties(grace_s)
            running.lifecycle.admit_queued()
            if auto_resume:
                running.lifecycle.auto_resume()
        except Exception:  # noqa: BLE001 - the monitor must outlive any one bad record
            log.exception("party health check failed")


async def _serve(
    servicer: CoordinatorServicer, listen: str, tls: IdentityWatch | None
) -> tuple[grpc.aio.Server, health.aio.HealthServicer, int]:
    """Create, bind and start the aio server (on the running loop)."""
    server = make_aio_server()
    coordinator_pb2_grpc.add_CoordinatorServiceServicer_to_server(servicer, server)
    checks = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(checks, server)
    port = bind(server, listen, tls)
    await server.start()
    await checks.set("", health_pb2.HealthCheckResponse.SERVING)
    return server, checks, port


async def _serve_ui(lifecycle: Lifecycle, listen: str, tls: IdentityWatch | None) -> UiServer:
    """The dashboard, over HTTPS with the coordinator's identity (renewed certificate
    files are served from the next handshake on, as by the gRPC server)."""
    from vfl.coordinator.ui.dashboard import Dashboard
    from vfl.coordinator.ui.server import start_ui

    return await start_ui(Dashboard(lifecycle), listen, tls)


def create_coordinator_server(
    db_path: str,
    listen: str,
    tls: Tls | None = None,
    *,
    health_interval_s: float = 2.0,
    party_grace_s: float = 10.0,
    control_timeout_s: float = CONTROL_TIMEOUT_S,
    auto_resume: bool = False,
    ui: str | None = None,
    register_wait_s: float = REGISTER_WAIT_S,
) -> CoordinatorServer:
    """Open the job store, start serving on `listen` (port 0: OS picks), and with `ui`
    (host:port) the dashboard; resume jobs.

    Raises:
        RuntimeError: the address cannot be bound.
        CoordinatorError: `ui` is not host:port or cannot be listened on.
    """
    store = JobStore(db_path)
    clients = PeerClients(tls)  # its identity, re-read when the files change, serves too
    lifecycle = Lifecycle(store, clients, control_timeout_s, register_wait_s)
    loop = LoopThread("coordinator-grpc")
    servicer = CoordinatorServicer(lifecycle)
    try:
        server, checks, port = loop.run(_serve(servicer, listen, clients.tls))
    except BaseException:
        servicer.pools.shutdown()
        loop.close()
        store.close()
        raise
    running = CoordinatorServer(server, lifecycle, port, checks, clients, loop, servicer)
    if ui is not None:
        try:
            running.ui = loop.run(_serve_ui(lifecycle, ui, clients.tls))
        except BaseException:
            running.stop(0)
            raise
    lifecycle.resume_pending()
    log.info("coordinator serving on port %d (db %s)", port, db_path)
    running.monitor = threading.Thread(
        target=_monitor,
        args=(running, health_interval_s, party_grace_s, auto_resume),
        name="party-monitor",
        daemon=True,
    )
    running.monitor.start()
    return running
