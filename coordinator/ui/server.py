"""The dashboard's web server (`vfl coordinator serve --ui 127.0.0.1:8080`): an aiohttp
app on the coordinator's own event loop, next to its gRPC server.

Routes (all GET, all behind `coordinator.ui.auth`):

    /                    the single page (static/index.html): jobs, a job, parties, models
    /static/...          its script, style and the vendored chart library (uPlot)
    /api/jobs            the job list            /api/jobs/{job}   a job with its curves
    /api/parties         parties and health      /api/models       the models

Handlers only translate: each runs one `Dashboard` call in the dashboard's own worker
threads (so a slow party answer never holds the event loop or the gRPC readers) and
turns `UnknownJob` / `AccessDenied` into 404 / 403.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import ssl
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web
from vfl.coordinator.errors import AccessDenied, CoordinatorError, UnknownJob
from vfl.coordinator.ui.auth import CALLER, guard, new_token, security_headers
from vfl.coordinator.ui.dashboard import Dashboard
from vfl.secure.pki.rotation import IdentityWatch, ServerContexts

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
DEFAULT_LISTEN = "127.0.0.1:8080"
DASHBOARD = web.AppKey("dashboard", Dashboard)
POOL = web.AppKey("pool", ThreadPoolExecutor)


@dataclass(frozen=True)
class UiAddress:
    host: str
    port: int

    @property
    def loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


def parse_listen(listen: str) -> UiAddress:
    """`host:port` (`[::1]:8080` for IPv6; port 0: any).

    Raises:
        CoordinatorError: not host:port.
    """
    host, _, port = listen.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or int(port) > 65535:
        raise CoordinatorError(
            f"--ui {listen!r} is not host:port; e.g. --ui {DEFAULT_LISTEN} (loopback only)"
        )
    return UiAddress(host, int(port))


def build_app(dashboard: Dashboard, token: str, pool: ThreadPoolExecutor) -> web.Application:
    app = web.Application(middlewares=[guard(token)])
    app[DASHBOARD], app[POOL] = dashboard, pool
    app.on_response_prepare.append(security_headers)
    app.router.add_get("/", _index)
    app.router.add_get("/api/jobs", _jobs)
    app.router.add_get("/api/jobs/{job}", _job)
    app.router.add_get("/api/parties", _parties)
    app.router.add_get("/api/models", _models)
    app.router.add_static("/static", STATIC, follow_symlinks=False)
    return app


async def _index(request: web.Request) -> web.StreamResponse:
    return web.FileResponse(STATIC / "index.html")


async def _jobs(request: web.Request) -> web.StreamResponse:
    return await _answer(request, lambda d, caller: d.jobs(caller))


async def _job(request: web.Request) -> web.StreamResponse:
    job_id = request.match_info["job"]
    return await _answer(request, lambda d, caller: d.job(caller, job_id))


async def _parties(request: web.Request) -> web.StreamResponse:
    return await _answer(request, lambda d, caller: d.parties(caller))


async def _models(request: web.Request) -> web.StreamResponse:
    return await _answer(request, lambda d, caller: d.models(caller))


async def _answer(
    request: web.Request, read: Callable[[Dashboard, str | None], Any]
) -> web.StreamResponse:
    """`read(dashboard, caller)` in a worker thread, as JSON; errors as statuses."""
    caller = request[CALLER] or None
    dashboard = request.app[DASHBOARD]
    loop = asyncio.get_running_loop()
    try:
        body = await loop.run_in_executor(request.app[POOL], read, dashboard, caller)
    except UnknownJob as exc:
        return web.json_response({"error": str(exc)}, status=404)
    except AccessDenied as exc:
        return web.json_response({"error": str(exc)}, status=403)
    return web.json_response(body)


@dataclass
class UiServer:
    """A running dashboard; `stop()` ends it (call from outside its event loop)."""

    url: str  # where it serves, without the token
    token: str
    runner: web.AppRunner
    pool: ThreadPoolExecutor

    @property
    def login_url(self) -> str:
        return f"{self.url}/?token={self.token}"

    async def stop(self) -> None:
        await self.runner.cleanup()
        self.pool.shutdown(wait=False, cancel_futures=True)


async def start_ui(dashboard: Dashboard, listen: str, tls: IdentityWatch | None) -> UiServer:
    """Serve the dashboard on `listen` (on the running event loop): HTTPS with the
    coordinator's current certificate (a renewed one from the next handshake on:
    `ServerContexts`) and optional federation client certificates when `tls` is set, else
    HTTP. A new token each start.

    Raises:
        CoordinatorError: `listen` is not host:port, or cannot be listened on.
    """
    address = parse_listen(listen)
    token = new_token()
    pool = ThreadPoolExecutor(2, thread_name_prefix="coordinator-ui")
    runner = web.AppRunner(build_app(dashboard, token, pool), access_log=None)
    await runner.setup()
    # a certificate, else the token
    context = None if tls is None else ServerContexts(tls, "dashboard", ssl.CERT_OPTIONAL).listening
    try:
        site = web.TCPSite(runner, address.host, address.port, ssl_context=context)
        await site.start()
    except BaseException as exc:
        await runner.cleanup()
        pool.shutdown(wait=False)
        if isinstance(exc, OSError):
            raise CoordinatorError(
                f"--ui {listen}: cannot listen there ({exc.strerror or exc}); "
                f"choose another address, e.g. --ui {address.host}:0 for any free port"
            ) from None
        raise
    port = runner.addresses[0][1]
    host = f"[{address.host}]" if ":" in address.host else address.host
    url = f"{'https' if tls else 'http'}://{host}:{port}"
    if not address.loopback:
        log.warning(
            "dashboard listens on %s, not loopback: anyone who can reach it may try its token%s",
            address.host,
            "" if tls else "; without --tls the token travels in clear",
        )
    log.info("dashboard serving at %s (read-only)", url)
    return UiServer(url, token, runner, pool)
