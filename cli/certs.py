"""`vfl certs`: a federation CA and identity certificates (`secure.pki`).

Identities:

    <party id>     a party daemon, e.g. bank (its config's `party`)
    coordinator    the coordinator daemon
    admin          an operator running `vfl submit/jobs/status/watch/cancel/health`
                   (any id works: `--identity`; the coordinator serves the user commands
                   to every certificate of the federation)

Between organisations (`secure.pki.requests`): each runs `vfl certs request --party ID` in
its own folder (a private key that never leaves it, and ID.csr), sends the .csr to the CA
operator, who runs `vfl certs sign CA_DIR ID.csr` and hands back ID.crt and ca.crt; that
folder is the process's `--tls DIR`. `vfl certs issue --bundle OUT` is the single-operator
shortcut for one machine (a laptop, tests): the CA operator makes every key itself.
Either way the id is also a DNS name of the certificate, so a client that dials party X
by any address checks that the server's certificate names X; keep ca.key with the CA
operator only. A daemon re-reads its folder when the files change (renewal without a
restart).
"""

from __future__ import annotations

import argparse
import os

from vfl.cli.commands import actions
from vfl.rpc import COORDINATOR_ID
from vfl.secure.pki.certs import PartyFiles, init_ca
from vfl.secure.pki.federation import ADMIN_ID, export_bundle, issue_identity, load_identity
from vfl.secure.pki.requests import request, sign


def client_tls(args: argparse.Namespace) -> PartyFiles | None:
    """TLS files of a CLI client (`--tls DIR --identity ID`), or None without `--tls`."""
    return load_identity(args.tls, args.identity) if args.tls else None


def cmd_init(args: argparse.Namespace) -> int:
    files = init_ca(args.dir, force=args.force, days=args.days)
    print(f"federation CA: {files.cert} (keep {files.key} private)")
    print(
        f"next: each organisation runs `vfl certs request --party ID` in its own folder "
        f"(parties, {COORDINATOR_ID}, {ADMIN_ID}); sign each request with "
        f"`vfl certs sign {args.dir} ID.csr`"
    )
    return 0


def cmd_issue(args: argparse.Namespace) -> int:
    files = issue_identity(args.dir, args.party, args.host, args.days, args.force)
    print(f"{args.party}: {files.cert}, {files.key}")
    if args.bundle:
        out = export_bundle(args.dir, args.party, args.bundle)
        print(f"bundle for {args.party}: {out} (use it as --tls {out})")
    return 0


def cmd_request(args: argparse.Namespace) -> int:
    files = request(args.dir, args.party, tuple(args.host), force=args.force)
    print(f"{args.party}: private key {files.key} (stays here, mode 0600)")
    print(f"signing request {files.csr}: send it to the CA operator (it holds no secret)")
    print(f"next, at the CA: vfl certs sign CA_DIR {files.csr.name}")
    return 0


def cmd_sign(args: argparse.Namespace) -> int:
    signed = sign(args.ca_dir, args.request, args.out, args.days)
    print(
        f"signed '{signed.party_id}' (names: {', '.join(signed.hosts)}), valid until "
        f"{signed.not_after:%Y-%m-%d %H:%M} UTC"
    )
    print(f"hand back {signed.cert} and {signed.ca_cert}; with its key they make its --tls DIR")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """`vfl certs init DIR`, `request --party ID`, `sign CA_DIR REQ.csr`, `issue DIR --party ID`."""
    certs_sub = actions(sub, "certs", help="federation CA and certificates for mutual TLS")
    init = certs_sub.add_parser("init", help="create a federation CA in DIR")
    init.add_argument("dir", help="CA folder (ca.crt, ca.key)")
    init.add_argument("--days", type=int, default=3650, help="CA validity")
    init.add_argument("--force", action="store_true", help="replace an existing CA")
    init.set_defaults(fn=cmd_init)
    _add_request_and_sign(certs_sub)
    iss = certs_sub.add_parser(
        "issue",
        help="single-operator shortcut (one machine): make a key and certificate at the CA; "
        "between organisations use request + sign",
    )
    iss.add_argument("dir", help="CA folder from `vfl certs init`")
    iss.add_argument(
        "--party", required=True, help=f"party id, '{COORDINATOR_ID}', or '{ADMIN_ID}'"
    )
    iss.add_argument(
        "--host", action="append", default=[], help="extra DNS name or IP (repeatable)"
    )
    iss.add_argument("--days", type=int, default=365, help="validity")
    iss.add_argument("--force", action="store_true", help="re-issue existing files")
    iss.add_argument("--bundle", metavar="OUT", help="also copy CA cert, cert and key to OUT")
    iss.set_defaults(fn=cmd_issue)


def _add_request_and_sign(certs_sub: argparse._SubParsersAction) -> None:
    req = certs_sub.add_parser(
        "request", help="make this organisation's private key and a signing request (.csr)"
    )
    req.add_argument(
        "--party", required=True, help=f"party id, '{COORDINATOR_ID}', or '{ADMIN_ID}'"
    )
    req.add_argument("--dir", default=".", help="the organisation's folder (default: here)")
    req.add_argument(
        "--host", action="append", default=[], help="extra DNS name or IP to ask for (repeatable)"
    )
    req.add_argument("--force", action="store_true", help="replace an existing key")
    req.set_defaults(fn=cmd_request)
    sig = certs_sub.add_parser("sign", help="at the CA: sign a request, write the certificate")
    sig.add_argument("ca_dir", help="CA folder from `vfl certs init`")
    sig.add_argument("request", help="the organisation's <id>.csr")
    sig.add_argument("--out", help="where to write <id>.crt and ca.crt (default: next to it)")
    sig.add_argument("--days", type=int, default=365, help="validity")
    sig.set_defaults(fn=cmd_sign)


def add_tls_flags(sp: argparse.ArgumentParser, client: bool) -> None:
    """`--tls DIR` (and `--identity` for CLI clients)."""
    default = os.environ.get("VFL_TLS") if client else None
    sp.add_argument(
        "--tls",
        metavar="DIR",
        default=default,
        help="mutual TLS: DIR holds ca.crt and this identity's .crt/.key"
        + (" (env VFL_TLS)" if client else ""),
    )
    if client:
        sp.add_argument(
            "--identity",
            default=os.environ.get("VFL_IDENTITY", ADMIN_ID),
            help=f"whose certificate in DIR to use (env VFL_IDENTITY; default {ADMIN_ID})",
        )
