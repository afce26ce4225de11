"""The two daemons' entry points, `coordinator serve` and `party serve`, with the logging,
signal handlers and parent watchdog every daemon process gets. The coordinator starts
through the API (`vfl.daemons.start_coordinator`); the party daemon's own server is
started here."""

from __future__ import annotations

import argparse
import ctypes
import gc
import os
import signal
import sys
import threading
from pathlib import Path

from vfl.cli import certs
from vfl.cli.commands import actions, seconds
from vfl.contract.logs import configure_daemon_logging
from vfl.errors import CoordinatorError
from vfl.rpc import COORDINATOR_ID

MALLOC_ARENAS = 2  # glibc's malloc arenas (default: 8 per core, each keeping freed memory)
MMAP_FROM = 1 << 18  # bytes from which glibc maps a block of its own (returned when freed)
M_ARENA_MAX, M_MMAP_THRESHOLD = -8, -3  # glibc's mallopt parameters


def _few_malloc_arenas() -> None:
    """Cap glibc's malloc arenas: a daemon's many threads (gRPC, PSI, training) each get an
    arena by default, and each keeps the memory freed in it (measured: 75 MB less peak in
    a 1e6-row job). Elsewhere than glibc, nothing to do."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(M_ARENA_MAX, MALLOC_ARENAS)
        libc.mallopt(M_MMAP_THRESHOLD, MMAP_FROM)  # fixed: no heap growth from large blocks
    except (OSError, AttributeError):
        pass


class _Stop(threading.Event):
    """Set when the daemon should stop; `why` says what asked it to (a planned stop)."""

    why = ""

    def stop(self, why: str) -> None:
        if not self.is_set():
            self.why = why
        self.set()


def _daemon_setup(args: argparse.Namespace) -> _Stop:
    """Logging, signal handlers and the parent watchdog of a daemon process."""
    _few_malloc_arenas()
    configure_daemon_logging()
    stop = _Stop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(
            sig,
            lambda n, _: stop.stop(f"its operator stopped the daemon ({signal.Signals(n).name})"),
        )
    if args.parent_pid:

        def watch_parent() -> None:
            while not stop.wait(1.0):
                if os.getppid() != args.parent_pid:
                    stop.stop("the process that started the daemon ended")

        threading.Thread(target=watch_parent, daemon=True).start()
    return stop


def _absolute(args: argparse.Namespace, *names: str) -> None:
    """Make the path flags `names` absolute at once: relative to the folder the daemon was
    started in, whatever later reads them (a certificate watch, a log line, a peer's
    message)."""
    for name in names:
        value = getattr(args, name, None)
        if value:
            setattr(args, name, str(Path(value).resolve()))


def _write_port(path: str | None, port: int) -> None:
    if path:
        tmp = Path(path + ".tmp")
        tmp.write_text(str(port))
        tmp.replace(path)


def cmd_coordinator_serve(args: argparse.Namespace) -> int:
    from vfl.daemons import start_coordinator

    _absolute(args, "db", "tls", "port_file")
    tls = certs.load_identity(args.tls, COORDINATOR_ID) if args.tls else None
    stop = _daemon_setup(args)
    _warn_insecure(tls is None)
    coordinator = start_coordinator(
        args.db,
        args.listen,
        tls,
        party_grace_s=args.party_grace,
        auto_resume=args.auto_resume,
        ui=args.ui,
        metrics=args.metrics,
        register_wait_s=args.register_wait,
    )
    _metrics_line(coordinator.metrics_url)
    _write_port(args.port_file, coordinator.port)
    print(f"coordinator listening on port {coordinator.port} (db {args.db})", file=sys.stderr)
    if coordinator.dashboard_url is not None:
        print(f"dashboard (read-only): {coordinator.dashboard_url}", file=sys.stderr, flush=True)
    stop.wait()
    coordinator.stop()
    return 0


def cmd_party_serve(args: argparse.Namespace) -> int:
    import dataclasses

    import torch
    from vfl.daemons import serve_metrics
    from vfl.party.config import load_party_config
    from vfl.party.server import create_party_server

    _absolute(args, "config", "tls", "audit", "state_dir", "port_file")
    config = load_party_config(args.config)
    overrides = {"listen": args.listen, "coordinator": args.coordinator}
    overrides["advertise"] = args.advertise
    overrides["state_dir"] = args.state_dir and Path(args.state_dir)
    config = dataclasses.replace(config, **{k: v for k, v in overrides.items() if v})
    tls = certs.load_identity(args.tls, config.party_id) if args.tls else None
    stop = _daemon_setup(args)
    _warn_insecure(tls is None)
    torch.set_num_threads(1)  # several parties share a machine's cores
    server = create_party_server(config, tls, options=_daemon_options(args))
    gc.freeze()  # what starting made lives as long as the daemon: no full collection scans it
    try:
        metrics = serve_metrics(server.daemon.metrics.registry, args.metrics, server.clients.tls)
    except CoordinatorError:
        server.stop(0)
        raise
    _metrics_line(metrics.url if metrics is not None else None)
    _write_port(args.port_file, server.port)
    print(f"party {config.party_id} listening on {server.address}", file=sys.stderr)
    stop.wait()
    server.stop(reason=stop.why)
    if metrics is not None:
        metrics.stop()
    return 0


def _metrics_line(url: str | None) -> None:
    """Where the daemon's `--metrics` endpoint serves, if asked for."""
    if url:
        print(f"metrics on {url}", file=sys.stderr, flush=True)


def _daemon_options(args: argparse.Namespace):
    from pydantic import ValidationError
    from vfl.contract.spec import NetworkSpec, explain
    from vfl.party.daemon import DaemonOptions

    network = None
    if args.bandwidth_mbps is not None:
        try:
            network = NetworkSpec(bandwidth_mbps=args.bandwidth_mbps, rtt_ms=args.rtt_ms or 0.0)
        except ValidationError as exc:
            raise CoordinatorError(
                f"--bandwidth-mbps/--rtt-ms: {explain(exc, NetworkSpec)}"
            ) from None
    elif args.rtt_ms is not None:
        raise CoordinatorError("--rtt-ms needs --bandwidth-mbps too")
    return DaemonOptions(audit_dir=args.audit, network=network, record_views=args.record_views)


def _warn_insecure(insecure: bool) -> None:
    if insecure:
        print(
            "warning: no TLS: traffic is not encrypted and parties are not authenticated; "
            "use --tls DIR (see `vfl certs`) outside a trusted network",
            file=sys.stderr,
        )


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The commands `coordinator serve` and `party serve`."""

    def daemon_flags(sp: argparse.ArgumentParser) -> None:
        sp.add_argument(
            "--metrics",
            metavar="HOST:PORT",
            help="serve Prometheus metrics at HOST:PORT/metrics (off by default): with "
            "--tls over HTTPS, only to clients with a certificate of the federation CA; "
            "without, plain HTTP (bind it to loopback or a monitoring network)",
        )
        sp.add_argument("--port-file", help="write the bound port here once serving")
        sp.add_argument("--parent-pid", type=int, help=argparse.SUPPRESS)

    co_sub = actions(sub, "coordinator", help="the coordinator daemon")
    cs = co_sub.add_parser("serve", help="serve the coordinator")
    cs.add_argument("--db", default="jobs.sqlite", help="SQLite job store (created if absent)")
    cs.add_argument("--listen", default="127.0.0.1:7700", help="host:port (port 0: any)")
    cs.add_argument(
        "--party-grace",
        type=seconds,
        default=10.0,
        metavar="S",
        help="seconds a party may stay silent before its running jobs pause (default 10)",
    )
    cs.add_argument(
        "--auto-resume",
        action="store_true",
        help="resume paused jobs by themselves once all their parties answer again",
    )
    cs.add_argument(
        "--register-wait",
        type=float,
        default=60.0,
        metavar="S",
        help="a submitted job waits QUEUED up to S seconds for parties that have not "
        "registered yet (still starting), then fails naming them (default 60)",
    )
    cs.add_argument(
        "--ui",
        nargs="?",
        const="127.0.0.1:8080",
        metavar="HOST:PORT",
        help="serve the read-only web dashboard (default 127.0.0.1:8080; off unless given); "
        "its token is printed at start",
    )
    certs.add_tls_flags(cs, client=False)
    daemon_flags(cs)
    cs.set_defaults(fn=cmd_coordinator_serve)

    pa_sub = actions(sub, "party", help="the party daemon")
    ps = pa_sub.add_parser("serve", help="serve a party next to its data")
    ps.add_argument("--config", required=True, help="party.yaml")
    ps.add_argument("--listen", help="override the config's listen address")
    ps.add_argument("--coordinator", help="override the config's coordinator address")
    ps.add_argument("--advertise", help="override the config's advertised host:port")
    ps.add_argument(
        "--state-dir",
        metavar="DIR",
        help="checkpoints and keys of this party's jobs (default: the config's state_dir, "
        "else <party>-state beside the config)",
    )
    certs.add_tls_flags(ps, client=False)
    ps.add_argument("--audit", metavar="DIR", help="log every data-plane envelope to DIR")
    ps.add_argument(
        "--record-views",
        action="store_true",
        help="keep each job's view at this party (what it received, decrypted and held, "
        "step by step) in its state directory, for `vfl attack`; off by default",
    )
    ps.add_argument("--bandwidth-mbps", type=float, help="emulate a WAN link: bandwidth")
    ps.add_argument("--rtt-ms", type=float, help="emulate a WAN link: round-trip time")
    daemon_flags(ps)
    ps.set_defaults(fn=cmd_party_serve)
