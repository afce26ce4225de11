"""`vfl certs`: a federation CA and identity certificates (`secure.pki.federation`).

Identities:

    <party id>     a party daemon, e.g. bank (its config's `party`)
    coordinator    the coordinator daemon
    admin          an operator running `vfl submit/jobs/status/watch/cancel/health`
                   (any id works: `--identity`; the coordinator serves the user commands
                   to every certificate of the federation)

`vfl certs issue` also puts the id in the certificate's DNS names, so a client that dials
party X by any address checks that the server's certificate names X. `--bundle OUT`
copies what one process needs (ca.crt, <id>.crt, <id>.key) into its own folder, which is
what a daemon's `--tls DIR` reads; keep ca.key with the CA operator only.
"""

from __future__ import annotations

import argparse
import os

from proto.rpc import COORDINATOR_ID
from secure.pki.certs import PartyFiles, init_ca
from secure.pki.federation import ADMIN_ID, export_bundle, issue_identity, load_identity


def client_tls(args: argparse.Namespace) -> PartyFiles | None:
    """TLS files of a CLI client (`--tls DIR --identity ID`), or None without `--tls`."""
    return load_identity(args.tls, args.identity) if args.tls else None


def cmd_init(args: argparse.Namespace) -> int:
    files = init_ca(args.dir, force=args.force, days=args.days)
    print(f"federation CA: {files.cert} (keep {files.key} private)")
    print(f"next: vfl certs issue {args.dir} --party {COORDINATOR_ID} (and each party, {ADMIN_ID})")
    return 0


def cmd_issue(args: argparse.Namespace) -> int:
    files = issue_identity(args.dir, args.party, args.host, args.days, args.force)
    print(f"{args.party}: {files.cert}, {files.key}")
    if args.bundle:
        out = export_bundle(args.dir, args.party, args.bundle)
        print(f"bundle for {args.party}: {out} (use it as --tls {out})")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """`vfl certs init DIR` and `vfl certs issue DIR --party ID`."""
    certs = sub.add_parser("certs", help="federation CA and certificates for mutual TLS")
    certs_sub = certs.add_subparsers(dest="action", required=True)
    init = certs_sub.add_parser("init", help="create a federation CA in DIR")
    init.add_argument("dir", help="CA folder (ca.crt, ca.key)")
    init.add_argument("--days", type=int, default=3650, help="CA validity")
    init.add_argument("--force", action="store_true", help="replace an existing CA")
    init.set_defaults(fn=cmd_init)
    iss = certs_sub.add_parser("issue", help="issue a certificate for a party id")
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
