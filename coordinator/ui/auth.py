"""Who may read the dashboard (docs/security.md, "The dashboard").

Every request needs one of:

- a client certificate of the federation (only when the coordinator runs with `--tls`:
  the dashboard then serves HTTPS with the coordinator's certificate and asks for a client
  certificate from the federation CA; a certificate from another CA fails the handshake).
  The caller is the identity it names, and `coordinator.access` decides what it sees, as
  for the gRPC API;
- the dashboard's token, printed once when the coordinator starts: opening
  `/?token=TOKEN` stores it in a cookie (HttpOnly, SameSite=Strict) and redirects to the
  page without it; scripts may send `Authorization: Bearer TOKEN`. The token reads what an
  operator reads.

Anything else gets 401 naming both ways in. The dashboard is read-only: any method but GET
and HEAD gets 405. Every answer carries a content security policy that allows scripts,
styles and fetches from the dashboard itself only.
"""

from __future__ import annotations

import hmac
import secrets
import ssl
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware
from vfl.secure.errors import SecureError
from vfl.secure.pki.certs import party_id_from_cert

COOKIE = "vfl_ui"
CALLER = "vfl_caller"  # request key: the certificate's identity, "" for the token
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",  # the token may be in the address bar once
    "Cache-Control": "no-store",
}


def new_token() -> str:
    return secrets.token_urlsafe(24)


def guard(token: str) -> Middleware:
    """The aiohttp middleware that lets through GET/HEAD requests with a federation
    certificate or `token`; `request[CALLER]` is then the certificate's identity, or ""
    for the token."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method not in ("GET", "HEAD"):
            raise web.HTTPMethodNotAllowed(
                request.method, ["GET", "HEAD"], text="the dashboard is read-only\n"
            )
        identity = _certificate_identity(request)
        if identity is not None:
            request[CALLER] = identity
            return await handler(request)
        given = request.query.get("token")
        if given is not None and _same(given, token):
            raise _login(request, token)
        if _same(_presented(request), token):
            request[CALLER] = ""
            return await handler(request)
        raise web.HTTPUnauthorized(
            text="the dashboard needs its token: open the address the coordinator printed "
            "at start (.../?token=...), or present a client certificate of the federation\n"
        )

    return middleware


async def security_headers(request: web.Request, response: web.StreamResponse) -> None:
    """The `on_response_prepare` hook: the headers above on every answer."""
    for name, value in _HEADERS.items():
        response.headers.setdefault(name, value)


def _login(request: web.Request, token: str) -> web.HTTPSeeOther:
    """The answer that keeps the token in a cookie and sends the browser to the page
    without it."""
    query = {k: v for k, v in request.query.items() if k != "token"}
    response = web.HTTPSeeOther(request.rel_url.with_query(query))
    response.set_cookie(
        COOKIE, token, httponly=True, samesite="Strict", secure=request.secure, path="/"
    )
    return response


def _presented(request: web.Request) -> str:
    auth = request.headers.get("Authorization", "")
    if auth.startswith("Bearer "):
        return auth[len("Bearer ") :]
    return request.cookies.get(COOKIE, "")


def _same(given: str, token: str) -> bool:
    return bool(given) and hmac.compare_digest(given.encode(), token.encode())


def _certificate_identity(request: web.Request) -> str | None:
    """The identity of the client certificate (verified against the federation CA by the
    TLS handshake); None without one.

    Raises:
        HTTPForbidden: the certificate names no valid identity.
    """
    transport = request.transport
    tls = transport.get_extra_info("ssl_object") if transport is not None else None
    if not isinstance(tls, ssl.SSLObject | ssl.SSLSocket):
        return None
    der = tls.getpeercert(binary_form=True)
    if not der:
        return None
    try:
        return party_id_from_cert(der)
    except SecureError as exc:
        raise web.HTTPForbidden(text=f"cannot identify the client certificate: {exc}\n") from None
