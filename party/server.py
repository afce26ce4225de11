"""Starting and stopping a party daemon: gRPC server, health service, registration.

The server's calls run on planes, each with threads of its own (`rpc.planes`;
docs/architecture.md, "Threads per plane"): the data plane (`Push`: training jobs'
envelopes, and on a pool of its own those of online scoring sessions; one certificate
holds at most `limits.peer_streams` Push streams on each, and a stream that sends no chunk
for `limits.chunk_timeout_s` is cancelled), the scoring plane
(`Predict`: at most `scoring.threads` calls held, one more refused at once with
RESOURCE_EXHAUSTED; its threads all start at the first call, so that a burst finds them
waiting; which calls a model's micro-batches take is `party.inference.batcher`'s), and
the control plane (the coordinator's calls, health, info, opening scoring sessions) on
the server's own pool. No scoring load takes a thread that
a training job or the coordinator's health probe needs, and a passive party's answer to
a scoring session never waits for a thread that the waiting `Predict` calls hold.
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from vfl.coordinator.client import CoordinatorClient
from vfl.party.config import PartyConfig
from vfl.party.daemon import DaemonOptions, PartyDaemon
from vfl.party.report_sender import ReportSender
from vfl.party.servicer import PartyServicer
from vfl.party.transport.grpc_channel import SESSION_PLANE
from vfl.proto import party_pb2_grpc
from vfl.rpc import (
    COORDINATOR_ID,
    PLANE_KEY,
    PeerClients,
    Plane,
    PlaneRouter,
    Tls,
    bind,
    explain,
    handshake_failed,
    host_of,
    make_server,
)
from vfl.secure.pki.rotation import IdentityWatch

log = logging.getLogger(__name__)

LOCATE_TIMEOUT_S = 2.0  # how long a scoring session waits for the coordinator's addresses

REGISTER_TIMEOUT_S = 60.0  # how long a party waits for its coordinator to come up
CONTROL_THREADS = 16  # the coordinator's calls, health, info, scoring sessions opened
DATA_THREADS = 64  # envelopes of training jobs taken at once (at least)
SESSION_THREADS = 32  # envelopes of online scoring sessions taken at once (at least)
DATA_SHARE, SESSION_SHARE = 4, 2  # one peer holds at most 1/4 and 1/2 of these threads
_SERVICE = "/vfl.v1.PartyService/"


def planes(config: PartyConfig) -> list[Plane]:
    """The planes of a party daemon's server, the first that holds a call serving it."""
    threads = config.scoring.threads
    streams = config.limits.peer_streams
    session = (PLANE_KEY, SESSION_PLANE)
    return [
        _push_plane(config, "session", max(SESSION_THREADS, SESSION_SHARE * streams), session),
        _push_plane(config, "data", max(DATA_THREADS, DATA_SHARE * streams)),
        Plane(
            "scoring",
            frozenset({f"{_SERVICE}Predict"}),
            threads,
            admit=True,
            warm=True,
            busy=f"party '{config.party_id}' holds {threads} online scoring calls at once "
            "(its config's scoring.threads)",
        ),
    ]


def _push_plane(
    config: PartyConfig, name: str, threads: int, metadata: tuple[str, str] | None = None
) -> Plane:
    """A plane of `Push` calls: one certificate holds at most `limits.peer_streams` of its
    `threads`, and a stream that sends no chunk for `limits.chunk_timeout_s` is cancelled."""
    streams = config.limits.peer_streams
    return Plane(
        name,
        frozenset({f"{_SERVICE}Push"}),
        threads,
        metadata=metadata,
        per_caller=streams,
        caller_busy=f"'{{caller}}' holds {streams} Push streams at once at party "
        f"'{config.party_id}', the most its config's limits.peer_streams lets one "
        "certificate hold",
        message_timeout_s=config.limits.chunk_timeout_s,
    )


@dataclass
class PartyServer:
    server: grpc.Server
    router: PlaneRouter  # the planes' thread pools
    daemon: PartyDaemon
    port: int
    address: str
    health: health.HealthServicer
    clients: PeerClients
    coordinator: CoordinatorClient | None
    reports: ReportSender | None  # delivers the jobs' reports to the coordinator

    def stop(self, grace: float = 2.0, reason: str = "") -> None:
        """Stop serving: its jobs end here (their checkpoints stay) and the peers' envelopes
        are refused as unavailable. With `reason` (a planned stop, e.g. "its operator
        stopped the daemon (SIGTERM)"), the coordinator is told first, so that every job
        started here pauses at once with that reason."""
        if reason:
            self.daemon.announce_stop(reason, timeout=grace)
        self.health.enter_graceful_shutdown()
        self.daemon.stopping()
        self.daemon.online.close_all("party daemon shutting down")
        for job_id in self.daemon.running_jobs():
            self.daemon.abort(job_id, "party daemon shutting down")
        self.daemon.join_jobs(timeout=grace + 10)  # no job thread may outlive the channels
        self.daemon.close()  # its executor's processes or Ray connection, its kept pools
        if self.reports is not None:  # the last reports go out while the coordinator answers
            self.reports.close(timeout=grace)
        self.server.stop(grace).wait()
        self.router.close()
        self.clients.close()
        if self.coordinator is not None:
            self.coordinator.close()


def create_party_server(
    config: PartyConfig, tls: Tls | None = None, options: DaemonOptions | None = None
) -> PartyServer:
    """Start a party daemon on `config.listen` and register it with the coordinator.

    Returns the running server with its bound port (port 0 in the config picks a free one).
    With `tls`, the server requires client certificates from the same CA, and its own
    outgoing calls present its certificate (which must name `config.party_id`); new
    certificate files put in place are used without a restart (`secure.pki.rotation`).

    Raises:
        RuntimeError: the address cannot be bound, or registration failed (names the fix).
    """
    clients = PeerClients(tls)  # one watch of the identity's files: clients and server
    identity = clients.tls
    coordinator = CoordinatorClient(config.coordinator, identity) if config.coordinator else None
    reports = ReportSender(coordinator) if coordinator is not None else None
    locate = functools.partial(registered_addresses, coordinator, config.party_id)
    daemon = PartyDaemon(config, clients, reports, options, locate)
    router = PlaneRouter(planes(config), daemon.metrics.refusal)
    server = make_server(CONTROL_THREADS, router)
    party_pb2_grpc.add_PartyServiceServicer_to_server(PartyServicer(daemon), server)
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    port = bind(server, config.listen, identity)
    server.start()
    address = config.advertise or f"{host_of(config.listen)}:{port}"
    daemon.address = address
    health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    health_servicer.set("vfl.v1.PartyService", health_pb2.HealthCheckResponse.SERVING)
    running = PartyServer(
        server, router, daemon, port, address, health_servicer, clients, coordinator, reports
    )
    if coordinator is not None:
        try:
            _register(coordinator, config, address, identity)
        except RuntimeError:
            running.stop(0)
            raise
    log.info("party %s serving on %s", config.party_id, address)
    return running


def _register(
    coordinator: CoordinatorClient, config: PartyConfig, address: str, tls: IdentityWatch | None
) -> None:
    """Register with the coordinator, waiting up to REGISTER_TIMEOUT_S for it to come up.

    Raises:
        RuntimeError: the coordinator refused, rejected the TLS handshake, or never answered.
    """
    deadline, delay = time.monotonic() + REGISTER_TIMEOUT_S, 0.2
    while True:
        try:
            coordinator.register(config.party_id, address, sorted(config.datasets))
            return
        except grpc.RpcError as exc:
            transient = exc.code() == grpc.StatusCode.UNAVAILABLE and not handshake_failed(
                exc, tls is not None
            )
            if not transient or time.monotonic() + delay > deadline:
                why = explain(exc, coordinator.address, tls, COORDINATOR_ID)
                raise RuntimeError(
                    f"cannot register party '{config.party_id}' with the coordinator at "
                    f"{coordinator.address}: {why}"
                ) from None
            time.sleep(delay)
            delay = min(delay * 2, 2.0)


def registered_addresses(
    directory: CoordinatorClient | None, party_id: str, model_id: str
) -> dict[str, str]:
    """Where the parties of `model_id` registered last, by the coordinator; {} without a
    coordinator or when it does not answer now (the session dials the addresses it has)."""
    if directory is None:
        return {}
    try:
        return directory.locate_parties(model_id, LOCATE_TIMEOUT_S)
    except grpc.RpcError as exc:
        log.info("party %s: no current addresses for model %s (%s)", party_id, model_id, exc.code())
        return {}
