"""A federation's certificate files: issuing identities, bundles for one process, a whole
local federation (`vfl run`), and loading one identity's files checked before use.

Identities (the party id in a certificate, `secure.pki.certs`):

    <party id>     a party daemon, e.g. bank (its config's `party`)
    coordinator    the coordinator daemon
    admin          an operator running the CLI's job commands (any id works)

An identity's certificate also carries the id as a DNS name, so a client that dials party
X by any address checks that the server's certificate names X.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from vfl.secure.pki.certs import (
    DEFAULT_HOSTS,
    CertError,
    PartyFiles,
    check_key_pair,
    check_party_id,
    init_ca,
    issue,
    verify_party_cert,
)

ADMIN_ID = "admin"


def issue_identity(
    directory: str | Path,
    party_id: str,
    hosts: Iterable[str] = (),
    days: int = 365,
    force: bool = False,
) -> PartyFiles:
    """Issue `<party_id>.crt/.key` whose DNS names include the id itself.

    Raises:
        CertError: invalid id, no CA in `directory`, or the files exist and not `force`.
    """
    names = list(dict.fromkeys([party_id, *DEFAULT_HOSTS, *hosts]))
    files = issue(directory, party_id, days=days, hosts=names, force=force)
    return PartyFiles(files.ca_cert, files.cert, files.key)


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


def load_identity(directory: str | Path, identity: str) -> PartyFiles:
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
                f"{path} is missing: in {root}, run `vfl certs request --party {identity}` and "
                "have the CA sign the request (`vfl certs sign CA_DIR "
                f"{identity}.csr`); on one machine, `vfl certs issue CA_DIR --party {identity} "
                f"--bundle {root}` does both"
            )
    try:
        named = verify_party_cert(cert.read_bytes(), ca.read_bytes())
    except CertError as exc:
        raise CertError(f"{cert}: {exc}") from None
    if named != identity:
        raise CertError(f"{cert} names party '{named}', not '{identity}'; use that party's files")
    _check_key(cert, key)
    return PartyFiles(ca, cert, key)


def _check_key(cert: Path, key: Path) -> None:
    try:
        check_key_pair(cert.read_bytes(), key.read_bytes())
    except CertError as exc:
        if "does not belong" in str(exc):
            raise CertError(f"{key} does not belong to {cert}; copy the matching pair") from None
        raise CertError(f"{key}: {exc}") from None
