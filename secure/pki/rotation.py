"""A daemon's TLS identity, re-read when its files change: certificates rotate without a
restart.

`IdentityWatch.current()` looks at the three files' size, mtime and inode (a few `stat`
calls) and, when any changed, reads them and switches only if the new set is whole: the
certificate is from the CA in `ca.crt`, currently valid, names the same identity, and
matches the key. Until then (a half-copied pair, an expired replacement) it keeps the set
it has and logs why once. The transport (`rpc`) hands the current set to new TLS
handshakes: the server's credentials ask on every handshake, clients dial new channels when
`generation` moves. Connections already open keep the certificate they started with.

A certificate that expires while the daemon runs is logged once as a warning naming the
renewal (`vfl certs request` / `sign`); peers then refuse new connections with it.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import ssl
import threading
from dataclasses import dataclass

from vfl.secure.pki.certs import (
    RENEW_HINT,
    CertError,
    PartyFiles,
    check_key_pair,
    load_cert,
    party_id_from_cert,
    verify_party_cert,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IdentityPem:
    """One consistent set of PEM bytes for TLS."""

    ca_cert: bytes
    cert: bytes
    key: bytes


class IdentityWatch:
    """The current TLS material of one identity, read from `files` (see the module doc)."""

    def __init__(self, files: PartyFiles) -> None:
        self.files = files
        self._lock = threading.Lock()
        self._stamp = self._stat()
        self._pem = self._read()  # as given: load_identity checked it, tests pass bad sets
        self._identity = _party_or_none(self._pem.cert)
        self._not_after = _not_after_or_none(self._pem.cert)
        self._warned: dt.datetime | None = None  # the expiry last warned about
        self.generation = 0

    def current(self) -> IdentityPem:
        """The set to use now, switching to changed files if they form a valid set."""
        with self._lock:
            stamp = self._stat()
            if stamp != self._stamp:
                self._stamp = stamp
                self._reload()
            self._warn_if_expired()
            return self._pem

    def check(self) -> int:
        """`current()` for its side effect; the generation after it (moves on each switch)."""
        self.current()
        return self.generation

    def expired_on(self) -> dt.datetime | None:
        """When the certificate in use expired; None while it is valid."""
        self.current()
        end = self._not_after
        return end if end is not None and dt.datetime.now(dt.timezone.utc) > end else None

    def _reload(self) -> None:
        try:
            pem = self._read()
            named = verify_party_cert(pem.cert, pem.ca_cert)
            if self._identity is not None and named != self._identity:
                raise CertError(f"it names party '{named}', not '{self._identity}'")
            check_key_pair(pem.cert, pem.key)
        except (CertError, OSError) as exc:
            log.warning(
                "new certificate files in %s not used (keeping the current ones): %s",
                self.files.cert.parent,
                exc,
            )
            return
        self._pem, self._identity = pem, named
        self._not_after = _not_after_or_none(pem.cert)
        self.generation += 1
        log.info("%s: switched to its new certificate (valid until %s)", named, self._not_after)

    def _warn_if_expired(self) -> None:
        end = self._not_after
        if end is not None and dt.datetime.now(dt.timezone.utc) > end and self._warned != end:
            self._warned = end
            log.warning("%s: its certificate expired on %s; %s", self._identity, end, RENEW_HINT)

    def _stat(self) -> tuple[tuple[int, int, int] | None, ...]:
        out: list[tuple[int, int, int] | None] = []
        for path in (self.files.ca_cert, self.files.cert, self.files.key):
            try:
                st = os.stat(path)
                out.append((st.st_size, st.st_mtime_ns, st.st_ino))
            except OSError:
                out.append(None)
        return tuple(out)

    def _read(self) -> IdentityPem:
        return IdentityPem(
            self.files.ca_cert.read_bytes(),
            self.files.cert.read_bytes(),
            self.files.key.read_bytes(),
        )


class ServerContexts:
    """TLS server contexts of one identity for the servers that are not gRPC (the
    coordinator's dashboard, the daemons' metrics): one for the identity as it is now, and
    on every handshake a check of its files (`IdentityWatch.check`, a few `stat` calls)
    that moves the connection to a context of renewed files once they form a valid set.
    Connections already open keep the certificate they started with. Client certificates
    are checked against the federation CA (`clients`: `ssl.CERT_REQUIRED` or, where a
    token may stand in for one, `ssl.CERT_OPTIONAL`)."""

    def __init__(self, watch: IdentityWatch, server: str, clients: ssl.VerifyMode) -> None:
        self.watch, self._server, self._clients = watch, server, clients
        self._lock = threading.Lock()  # handshakes may run in several threads
        self._generation = watch.check()
        self.listening = self._build()
        self.listening.sni_callback = self._handshake  # called with or without SNI
        self._current = self.listening

    def _build(self) -> ssl.SSLContext:
        files = self.watch.files
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(files.ca_cert))
        context.load_cert_chain(str(files.cert), str(files.key))
        context.verify_mode = self._clients
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        return context

    def _handshake(
        self, conn: ssl.SSLObject | ssl.SSLSocket, _name: str | None, _ctx: ssl.SSLContext
    ) -> None:
        with self._lock:
            generation = self.watch.check()
            if generation != self._generation:
                try:
                    self._current = self._build()
                except (ssl.SSLError, OSError) as exc:  # replaced again meanwhile: next time
                    log.warning("%s: the renewed certificate did not load: %s", self._server, exc)
                else:
                    self._generation = generation
                    log.info("%s: serving the renewed certificate", self._server)
            current = self._current
        if current is not self.listening:
            conn.context = current


def _not_after_or_none(cert: bytes) -> dt.datetime | None:
    try:
        return load_cert(cert).not_valid_after_utc
    except CertError:
        return None


def _party_or_none(cert: bytes) -> str | None:
    try:
        return party_id_from_cert(cert)
    except CertError:
        return None
