"""`vfl certs`: a federation CA, identity certificates, and loading them for mutual TLS.

Identities (the party id in a certificate, `secure/certs.py`):

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
import shutil
from collections.abc import Iterable
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from proto.rpc import COORDINATOR_ID, TlsFiles
from secure.pki.certs import CertError, check_party_id, init_ca, issue, verify_party_cert

ADMIN_ID = "admin"
DEFAULT_HOSTS = ("localhost", "127.0.0.1")


def issue_identity(
    directory: str | Path,
    party_id: str,
    hosts: Iterable[str] = (),
    days: int = 365,
    force: bool = False,
) -> TlsFiles:
    """Issue `<party_id>.crt/.key` whose DNS names include the id itself.

    Raises:
        CertError: invalid id, no CA in `directory`, or the files exist and not `force`.
    """
    names = list(dict.fromkeys([party_id, *DEFAULT_HOSTS, *hosts]))
    files = issue(directory, party_id, days=days, hosts=names, force=force)
    return TlsFiles(str(files.ca_cert), str(files.cert), str(files.key))


def export_bundle(directory: str | Path, party_id: str, out: str | Path) -> Path:
    """Copy ca.crt and the party's certificate and key (mode 0600) into `out`."""
    src, dst = Path(directory), Path(out)
    dst.mkdir(parents=True, exist_ok=True)
    for name in ("ca.crt", f"{party_id}.crt", f"{party_id}.key"):
        shutil.copyfile(src / name, dst / name)
    os.chmod(dst / f"{party_id}.key", 0o600)
    return dst


def local_federation(directory: str | Path, identities: Iterable[str]) -> Path:
    """A fresh CA with one certificate per identity (what `vfl run` / `vfl demo` use)."""
    init_ca(directory, force=True)
    for party_id in dict.fromkeys(identities):
        issue_identity(directory, party_id, force=True)
    return Path(directory)


def load_tls(directory: str | Path, identity: str) -> TlsFiles:
    """The CA, certificate and key of `identity` in `directory`, checked before use.

    Raises:
        CertError: a file is missing; the certificate is expired, from another CA, names
            another party, or does not match the key (each message names the fix).
    """
    root = Path(directory)
    check_party_id(identity)
    ca, cert, key = root / "ca.crt", root / f"{identity}.crt", root / f"{identity}.key"
    for path in (ca, cert, key):
        if not path.is_file():
            raise CertError(
                f"{path} is missing: create it with `vfl certs issue CA_DIR --party {identity} "
                f"--bundle {root}` (the CA from `vfl certs init CA_DIR`)"
            )
    try:
        named = verify_party_cert(cert.read_bytes(), ca.read_bytes())
    except CertError as exc:
        raise CertError(f"{cert}: {exc}") from None
    if named != identity:
        raise CertError(f"{cert} names party '{named}', not '{identity}'; use that party's files")
    _check_key(cert, key)
    return TlsFiles(str(ca), str(cert), str(key))


def _check_key(cert: Path, key: Path) -> None:
    try:
        private = serialization.load_pem_private_key(key.read_bytes(), password=None)
    except (ValueError, TypeError) as exc:
        raise CertError(f"{key} is not an unencrypted PEM private key: {exc}") from None
    public = x509.load_pem_x509_certificate(cert.read_bytes()).public_key()
    fmt = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    if private.public_key().public_bytes(*fmt) != public.public_bytes(*fmt):
        raise CertError(f"{key} does not belong to {cert}; re-issue or copy the matching pair")


def client_tls(args: argparse.Namespace) -> TlsFiles | None:
    """TLS files of a CLI client (`--tls DIR --identity ID`), or None without `--tls`."""
    return load_tls(args.tls, args.identity) if args.tls else None


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
