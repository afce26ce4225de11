"""The wire audit: every envelope a party sends or receives, logged for inspection.

`AuditLog` is an `EnvelopeHook`: for each envelope it appends one JSON line to
`DIR/<party>.jsonl` (job, tag, direction, sender, receiver, payload kind, size, sha256)
and writes the raw payload bytes to `DIR/<party>/<sha256>.bin`. The payloads are what
crossed (split's activations and derivatives, scored ids), so only the daemon's user may
read them: folders 0700, files 0600, whatever the umask (a folder that exists already is
narrowed too).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from pathlib import Path
from typing import BinaryIO

from vfl.secure.channel import decode_payload
from vfl.secure.errors import PayloadError


def payload_kind(data: bytes) -> str:
    try:
        return decode_payload(data).WhichOneof("kind") or "empty"
    except PayloadError:
        return "undecodable"


class AuditLog:
    def __init__(self, directory: str | Path, party_id: str, job_id: str) -> None:
        self.dir = Path(directory)
        self.blobs = self.dir / party_id
        for folder in (self.dir, self.blobs):
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            folder.chmod(0o700)
        self.path = self.dir / f"{party_id}.jsonl"
        self.job_id = job_id
        self._lock = threading.Lock()

    def __call__(self, direction: str, sender: str, receiver: str, tag: str, data: bytes) -> None:
        digest = hashlib.sha256(data).hexdigest()
        record = {
            "ts": time.time(),
            "job": self.job_id,
            "tag": tag,
            "direction": direction,
            "sender": sender,
            "receiver": receiver,
            "kind": payload_kind(data),
            "size": len(data),
            "sha256": digest,
        }
        blob = self.blobs / f"{digest}.bin"
        with self._lock:
            if not blob.exists():
                with _private(blob, os.O_WRONLY | os.O_CREAT | os.O_TRUNC) as fh:
                    fh.write(data)
            with _private(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND) as fh:
                fh.write((json.dumps(record) + "\n").encode())


def _private(path: Path, flags: int) -> BinaryIO:
    """`path` opened for writing, created 0600 (an existing file is narrowed to it)."""
    fd = os.open(path, flags, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "wb")


def read_audit(directory: str | Path, party: str | None = None) -> list[dict]:
    """All records of an audit directory (only `party`'s, if given), each with its payload
    bytes under 'data'."""
    out = []
    for log in sorted(Path(directory).glob(f"{party or '*'}.jsonl")):
        party = log.stem
        for line in log.read_text().splitlines():
            rec = json.loads(line)
            rec["data"] = (Path(directory) / party / f"{rec['sha256']}.bin").read_bytes()
            out.append(rec)
    return out
