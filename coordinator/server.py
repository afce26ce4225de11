"""Starting and stopping the coordinator daemon."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from coordinator.lifecycle import Lifecycle
from coordinator.servicer import CoordinatorServicer
from coordinator.store import JobStore
from party.transport import PeerClients
from proto import coordinator_pb2_grpc
from proto.rpc import TlsFiles, bind, make_server

log = logging.getLogger(__name__)


@dataclass
class CoordinatorServer:
    server: grpc.Server
    lifecycle: Lifecycle
    port: int
    health: health.HealthServicer
    clients: PeerClients

    def stop(self, grace: float = 2.0) -> None:
        self.health.enter_graceful_shutdown()
        self.server.stop(grace).wait()
        self.clients.close()
        self.lifecycle.store.close()


def create_coordinator_server(
    db_path: str, listen: str, tls: TlsFiles | None = None
) -> CoordinatorServer:
    """Open the job store, start serving on `listen` (port 0: OS picks), resume jobs."""
    store = JobStore(db_path)
    clients = PeerClients(tls)
    lifecycle = Lifecycle(store, clients)
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
    return CoordinatorServer(server, lifecycle, port, health_servicer, clients)
