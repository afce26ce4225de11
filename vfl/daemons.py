"""A daemon in this process: what `vfl coordinator serve` starts, and the Prometheus
endpoint every daemon may serve beside it (`vfl party serve` too). This is the API's one
module that loads the coordinator's server; the rest of the API and the `vfl` command
reach the coordinator only as its clients (`vfl.Client`), and `vfl.local` starts daemons
as processes of their own.

    start_coordinator   the coordinator daemon (job store, gRPC service, dashboard,
                        metrics), serving until `stop()`
    serve_metrics       a daemon's `/metrics` endpoint (HTTPS with its identity, or HTTP)

The caller (the CLI's `main`) owns logging, signal handlers and when to stop.
"""

from __future__ import annotations

from dataclasses import dataclass
from os import PathLike, fspath

from prometheus_client import CollectorRegistry
from vfl.coordinator.metrics import MetricsServer, serve_metrics as _serve_metrics
from vfl.coordinator.server import CoordinatorServer, create_coordinator_server
from vfl.secure.pki.certs import PartyFiles
from vfl.secure.pki.rotation import IdentityWatch

__all__ = ["MetricsServer", "RunningCoordinator", "serve_metrics", "start_coordinator"]


@dataclass(frozen=True)
class RunningCoordinator:
    """A coordinator serving in this process: `port` is the bound gRPC port,
    `dashboard_url` the dashboard's login URL (with its token) when asked for, and
    `metrics_url` where its metrics are served when asked for."""

    server: CoordinatorServer
    metrics: MetricsServer | None

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def dashboard_url(self) -> str | None:
        return self.server.ui.login_url if self.server.ui is not None else None

    @property
    def metrics_url(self) -> str | None:
        return self.metrics.url if self.metrics is not None else None

    def stop(self, grace: float = 2.0) -> None:
        """Stop serving (calls in progress get `grace` seconds), then the metrics."""
        self.server.stop(grace)
        if self.metrics is not None:
            self.metrics.stop()


def start_coordinator(
    db: str | PathLike[str],
    listen: str,
    tls: PartyFiles | None = None,
    *,
    party_grace_s: float = 10.0,
    auto_resume: bool = False,
    ui: str | None = None,
    metrics: str | None = None,
    register_wait_s: float = 60.0,
) -> RunningCoordinator:
    """Open the job store `db` (SQLite, created if absent), serve the coordinator on
    `listen` (host:port; port 0: the OS picks one) and resume its jobs.

    Args:
        tls: the coordinator's identity (a certificate naming `coordinator`); None serves
            without TLS.
        party_grace_s: seconds a party may stay silent before its running jobs pause.
        auto_resume: resume paused jobs by themselves once all their parties answer.
        ui: host:port of the read-only dashboard; None serves none.
        metrics: host:port of the Prometheus endpoint (`serve_metrics`); None serves none.
        register_wait_s: how long a submitted job waits (QUEUED) for parties that have not
            registered yet, before it fails naming them.

    Raises:
        StoreInUse: another coordinator has `db` open.
        RuntimeError: `listen` cannot be bound.
        CoordinatorError: `ui` or `metrics` is not host:port or cannot be listened on
            (the coordinator is stopped again).
    """
    server = create_coordinator_server(
        fspath(db),
        listen,
        tls,
        party_grace_s=party_grace_s,
        auto_resume=auto_resume,
        ui=ui,
        register_wait_s=register_wait_s,
    )
    try:
        served = serve_metrics(server.lifecycle.metrics.registry, metrics, server.clients.tls)
    except BaseException:
        server.stop(0)
        raise
    return RunningCoordinator(server, served)


def serve_metrics(
    registry: CollectorRegistry, address: str | None, tls: IdentityWatch | None = None
) -> MetricsServer | None:
    """Serve a daemon's `registry` at `address`/metrics (e.g. 127.0.0.1:9100): over mutual
    TLS with the daemon's identity `tls` (clients need a certificate of the federation's
    CA), else plain HTTP. None when `address` is None or empty.

    Raises:
        CoordinatorError: `address` is malformed or cannot be bound (names the flag).
    """
    if not address:
        return None
    return _serve_metrics(registry, address, tls)
