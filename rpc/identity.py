"""Who is calling, and who we are: TLS identities, callers' certificates, our version.

A process's TLS identity (`Tls`) is its certificate files, or them watched for rotation
(`watch`). Servicers ask `check_caller` whether the caller's certificate names the party a
request acts for (or `COORDINATOR_ID`); on an insecure server there are no identities to
check. `check_caller` / `check_caller_async` and `identify_caller_async` share one
decision, a `Problem` to answer with or none.
"""

from __future__ import annotations

import importlib.metadata

import grpc
from vfl.rpc.status import Problem
from vfl.secure.pki.certs import CertError, PartyFiles, party_id_from_cert
from vfl.secure.pki.rotation import IdentityWatch

Tls = PartyFiles | IdentityWatch  # a process's TLS identity: its files, or them watched

COORDINATOR_ID = "coordinator"  # the identity in the coordinator's certificate


def _package_version() -> str:
    try:
        return importlib.metadata.version("vfl-platform")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed: pip install -e .)"


VERSION = _package_version()  # this software's version, as daemons report it (vfl doctor)


def watch(tls: Tls | None) -> IdentityWatch | None:
    """`tls` as an `IdentityWatch` (files are read now), None for an insecure process."""
    if tls is None or isinstance(tls, IdentityWatch):
        return tls
    return IdentityWatch(tls)


def caller_party(context: grpc.ServicerContext | grpc.aio.ServicerContext) -> str | None:
    """The party id named by the caller's certificate; None on an insecure server.

    Raises:
        CertError: a TLS caller without a certificate that names a valid party id.
    """
    auth = context.auth_context()
    if auth.get("transport_security_type") != [b"ssl"]:
        return None
    pems = auth.get("x509_pem_cert")
    if not pems:
        raise CertError("the caller presented no client certificate")
    return party_id_from_cert(pems[0])


def _identify(context: grpc.ServicerContext | grpc.aio.ServicerContext) -> str | None | Problem:
    """The caller's identity (None: insecure), or the problem that it has none."""
    try:
        return caller_party(context)
    except CertError as exc:
        return grpc.StatusCode.PERMISSION_DENIED, f"cannot identify the caller: {exc}"


async def identify_caller_async(context: grpc.aio.ServicerContext) -> str | None:
    """`caller_party`, aborting with PERMISSION_DENIED when the certificate names no party.

    Raises:
        grpc.aio.AbortError: the caller's certificate names no party.
    """
    caller = _identify(context)
    if isinstance(caller, tuple):
        await context.abort(*caller)
        raise AssertionError("unreachable")  # context.abort raises
    return caller


def _caller_problem(
    context: grpc.ServicerContext | grpc.aio.ServicerContext, party: str, action: str
) -> Problem | None:
    caller = _identify(context)
    if isinstance(caller, tuple):
        return caller
    if caller is not None and not party:
        return grpc.StatusCode.INVALID_ARGUMENT, f"the request names no party ({action})"
    if caller is not None and caller != party:
        return (
            grpc.StatusCode.PERMISSION_DENIED,
            f"only party '{party}' may {action}, but the caller's certificate names party "
            f"'{caller}'; each process must use its own certificate (vfl certs issue)",
        )
    return None


def check_caller(context: grpc.ServicerContext, party: str, action: str) -> None:
    """Abort with PERMISSION_DENIED unless the caller's certificate names `party`.

    `action` completes "... may only ..." in the message, e.g. "send as party 'bank'".
    A no-op on an insecure server.

    Raises:
        Exception: gRPC's abort of the call (`context.abort`).
    """
    problem = _caller_problem(context, party, action)
    if problem is not None:
        context.abort(*problem)


async def check_caller_async(context: grpc.aio.ServicerContext, party: str, action: str) -> None:
    """`check_caller` for a `grpc.aio` servicer.

    Raises:
        grpc.aio.AbortError: the caller may not `action`.
    """
    problem = _caller_problem(context, party, action)
    if problem is not None:
        await context.abort(*problem)
