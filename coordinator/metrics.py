"""Prometheus metrics of the coordinator, and the HTTP endpoint both daemons serve them on.

Every daemon owns its `CollectorRegistry` (no process-wide default registry: two daemons in
one test process keep their numbers apart). `vfl coordinator serve --metrics HOST:PORT`
serves this one; `party.metrics` is the party daemon's. A daemon started with `--tls DIR`
serves them over HTTPS with its own certificate and answers only clients with a
certificate of the same federation CA (Prometheus' `tls_config`: `ca_file`, `cert_file`,
`key_file`, e.g. an operator identity `vfl certs request --party monitor`); a renewed
certificate is served from the next handshake on. Names and labels:

    vfl_coordinator_jobs{state}                 jobs in the store by state (read per scrape)
    vfl_coordinator_parties                     registered parties
    vfl_coordinator_rounds_total                training rounds the active parties reported
    vfl_coordinator_reports_total{party,event}  progress reports received
    vfl_coordinator_bytes_sent_total{party}     data-plane bytes each party sent in jobs
                                                that ended (from its final report)
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, make_wsgi_app
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import ThreadingWSGIServer
from prometheus_client.registry import Collector
from vfl.coordinator.errors import CoordinatorError
from vfl.proto import coordinator_pb2 as pb
from vfl.secure.pki.rotation import IdentityWatch, ServerContexts


@dataclass
class MetricsServer:
    """The HTTP(S) endpoint of one registry (`/metrics`)."""

    server: WSGIServer
    thread: threading.Thread
    url: str  # where it serves (port 0 in the flag: the OS picked one)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


class _Quiet(WSGIRequestHandler):
    """No access log line per scrape."""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass


def serve_metrics(
    registry: CollectorRegistry, address: str, tls: IdentityWatch | None = None
) -> MetricsServer:
    """Serve `registry` at `address`/metrics (e.g. 127.0.0.1:9100; port 0: any): over
    mutual TLS with the daemon's identity when `tls` is given (the module doc), else
    plain HTTP.

    Raises:
        CoordinatorError: the address is malformed or cannot be bound (names the flag).
    """
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit():
        raise CoordinatorError(f"--metrics '{address}': give HOST:PORT, e.g. 127.0.0.1:9100")

    class Server(ThreadingWSGIServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    try:
        server = make_server(host, int(port), make_wsgi_app(registry), Server, _Quiet)
    except OSError as exc:
        raise CoordinatorError(f"--metrics {address}: cannot listen there ({exc})") from None
    if tls is not None:  # the handshake runs in each request's thread, not in accept()
        contexts = ServerContexts(tls, "metrics", ssl.CERT_REQUIRED)
        server.socket = contexts.listening.wrap_socket(
            server.socket, server_side=True, do_handshake_on_connect=False
        )
    thread = threading.Thread(target=server.serve_forever, name="metrics", daemon=True)
    thread.start()
    shown = f"[{host}]" if ":" in host else host
    scheme = "https" if tls is not None else "http"
    return MetricsServer(server, thread, f"{scheme}://{shown}:{server.server_port}/metrics")


class _Callback(Collector):
    """A gauge family computed at each scrape by `read` (label value -> number)."""

    def __init__(self, name: str, doc: str, label: str, read: Callable[[], Mapping[str, float]]):
        self._name, self._doc, self._label, self._read = name, doc, label, read

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(self._name, self._doc, labels=[self._label])
        for value, count in sorted(self._read().items()):
            family.add_metric([value], count)
        yield family


class CoordinatorMetrics:
    """The coordinator's metrics. Args: `jobs_by_state` and `parties` read the store."""

    def __init__(
        self, jobs_by_state: Callable[[], Mapping[str, float]], parties: Callable[[], int]
    ) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(
            _Callback("vfl_coordinator_jobs", "Jobs by state.", "state", jobs_by_state)
        )
        self.registry.register(
            _Callback(
                "vfl_coordinator_parties",
                "Registered parties.",
                "kind",
                lambda: {"registered": float(parties())},
            )
        )
        self.rounds = Counter(
            "vfl_coordinator_rounds", "Training rounds reported.", registry=self.registry
        )
        self.reports = Counter(
            "vfl_coordinator_reports",
            "Progress reports received.",
            ["party", "event"],
            registry=self.registry,
        )
        self.bytes_sent = Counter(
            "vfl_coordinator_bytes_sent",
            "Data-plane bytes each party sent in jobs that ended.",
            ["party"],
            registry=self.registry,
        )
        self._lock = threading.Lock()
        self._rounds: dict[str, int] = {}  # job id -> the last round counted

    def report(self, job_id: str, party_id: str, request: pb.ReportProgressRequest) -> None:
        """Count one accepted report (rounds: the active party's, by how far they moved)."""
        event = request.WhichOneof("event") or "none"
        self.reports.labels(party_id, event).inc()
        if event == "round":
            with self._lock:
                last = self._rounds.get(job_id, 0)
                now = request.round.round
                self._rounds[job_id] = max(last, now)
            if now > last:
                self.rounds.inc(now - last)
        elif event == "done":
            self.bytes_sent.labels(party_id).inc(request.done.bytes_sent)
            with self._lock:
                self._rounds.pop(job_id, None)
