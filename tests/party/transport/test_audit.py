"""The wire audit holds what crossed (activations, derivatives, scored ids): only the
daemon's user may read it, whatever the umask."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from vfl.party.transport.audit import AuditLog, read_audit


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_audit_is_private_to_the_daemons_user(tmp_path: Path) -> None:
    # Prepare: a permissive umask, and an audit folder that exists already, world-readable
    old = os.umask(0o022)
    try:
        audit = tmp_path / "audit"
        audit.mkdir(mode=0o755)
        log = AuditLog(audit, "bank", "job-1")
        # Execute
        log("sent", "bank", "shop", "train/r1/act", b"activations")
        log("sent", "bank", "shop", "train/r2/act", b"more activations")
    finally:
        os.umask(old)
    # Assert
    folders = [audit, audit / "bank"]
    files = [audit / "bank.jsonl", *sorted((audit / "bank").iterdir())]
    assert len(files) == 3
    assert {f.name: _mode(f) for f in folders} == {f.name: 0o700 for f in folders}
    assert {f.name: _mode(f) for f in files} == {f.name: 0o600 for f in files}
    assert [r["data"] for r in read_audit(audit)] == [b"activations", b"more activations"]
