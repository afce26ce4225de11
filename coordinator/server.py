"""Starting and stopping the coordinator daemon."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from coordinator.lifecycle import CONTROL_TIMEOUT_S, Lifecycle
from coordinator.servicer import CoordinatorServicer
from coordinator.store import JobStore
from proto import coordinator_pb2_grpc
from proto.rpc import PeerClients, bind, make_server
from secure.pki.certs import PartyFiles

log = logging.getLogger(__name__)


@dataclass
class CoordinatorServer:
    server: grpc.Server
    lifecycle: Lifecycle
    port: int
    health: health.HealthServicer
    clients: PeerClients
    stopping: threading.Event = field(default_factory=threading.Event)
    monitor: threading.Thread | None = None

    def stop(self, grace: float = 2.0) -> None:
        self.stopping.set()
        self.health.enter_graceful_shutdown()
        if self.monitor is not None:  # its health probes use the clients closed below
            self.monitor.join(timeout=grace + 10)
        self.lifecycle.join(timeout=grace + 10)
        self.server.stop(grace).wait()
        self.clients.close()
        self.lifecycle.store.close()


def _monitor(
    running: CoordinatorServer, interval_s: float, grace_s: float, auto_resume: bool
) -> None:
    while not running.stopping.wait(interval_s):
        try:
            running.lifecycle.check_parties(grace_s)
            if auto_resume:
                running.lifecycle.auto_resume()
        except Exception:  # noqa: BLE001 - the monitor must outlive any one bad record
            log.exception("party health check failed")


def create_coordinator_server(
    db_path: str,
    listen: str,
    tls: PartyFiles | None = None,
    *,
    health_interval_s: float = 2.0,
    party_grace_s: float = 10.0,
    control_timeout_s: float = CONTROL_TIMEOUT_S,
    auto_resume: bool = False,
) -> CoordinatorServer:
    """Open the job store, start serving on `listen` (port 0: OS picks), resume jobs."""
    store = JobStore(db_path)
    clients = PeerClients(tls)
    lifecycle = Lifecycle(store, clients, control_timeout_s)
    server = make_server()
    coordinator_pb2_grpc.add_CoordinatorServiceServicer_to_server(
        CoordinatorServicer(lifecycle), server
    )
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    port = bind(server, listen, tls)
    server.start()
    health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    lifecycle.resume_pending()
    log.info("coordinator serving on port %d (db %s)", port, db_path)
    running = CoordinatorServer(server, lifecycle, port, health_servicer, clients)
    running.monitor = threading.Thread(
        target=_monitor,
        args=(running, health_interval_s, party_grace_s, auto_resume),
        name="party-monitor",
        daemon=True,
    )
    running.monitor.start()
    return running
