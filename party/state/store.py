"""A party's state directory on disk: per job, its checkpoints by round.

Writes are atomic (a temporary file, fsync, rename, fsync of the folder), so a crash in
the middle of a write leaves the previous checkpoint intact; only the newest `KEEP`
checkpoints of a job stay. Folders are created with mode 0700, files 0600: checkpoints
hold a party's model shares and, under blindfl, its private key.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from vfl.party.errors import CheckpointError, ConfigError
from vfl.party.state.checkpoint_file import Checkpoint, decode_checkpoint, encode_checkpoint

KEEP = 2
_NAME = re.compile(r"^round-(\d{9})\.ckpt$")
_SAFE_JOB = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class StateDir:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    @classmethod
    def create(cls, root: Path) -> StateDir:
        """A party's state directory, created (mode 0700) and checked to be writable.

        Raises:
            ConfigError: it cannot be created or written (names the folder and the fix).
        """
        fix = "pass a writable folder with --state-dir DIR (or state_dir: in the party config)"
        try:
            root.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise ConfigError(
                f"state directory {root} cannot be created ({exc.strerror}); {fix}"
            ) from None
        if not os.access(root, os.W_OK | os.X_OK):
            raise ConfigError(f"state directory {root} is not writable by this user; {fix}")
        return cls(root)

    def job_dir(self, job_id: str) -> Path:
        """Raises: CheckpointError: a job id that cannot name a folder."""
        if not safe_name(job_id):
            raise CheckpointError(f"job id {job_id!r} cannot name a checkpoint folder")
        return self.root / "jobs" / job_id

    def rounds(self, job_id: str) -> list[int]:
        """Rounds this party holds a checkpoint of, oldest first (not yet verified)."""
        folder = self.job_dir(job_id)
        if not folder.is_dir():
            return []
        found = (_NAME.match(p.name) for p in folder.iterdir())
        return sorted(int(m.group(1)) for m in found if m)

    def save(self, ck: Checkpoint) -> Path:
        """Write `ck` atomically and drop all but the newest `KEEP` checkpoints."""
        folder = self.job_dir(ck.job_id)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = folder / f"round-{ck.round:09d}.ckpt"
        write_atomically(path, encode_checkpoint(ck))
        for old in self.rounds(ck.job_id)[:-KEEP]:
            (folder / f"round-{old:09d}.ckpt").unlink(missing_ok=True)
        return path

    def load(self, job_id: str, rnd: int, spec_hash: str, party_id: str) -> Checkpoint:
        """The checkpoint of `job_id` after round `rnd`, checked to be this job's under this
        spec and this party's.

        Raises:
            CheckpointError: missing, corrupt, or of another job, spec or party (the
                message names the round and what this party holds).
        """
        path = self.job_dir(job_id) / f"round-{rnd:09d}.ckpt"
        where = f"party '{party_id}': checkpoint of job {job_id} round {rnd}"
        if not path.is_file():
            raise CheckpointError(
                f"{where} is missing (this party holds rounds {self.rounds(job_id)})"
            )
        ck = decode_checkpoint(path.read_bytes(), where)
        if (ck.job_id, ck.party_id, ck.round) != (job_id, party_id, rnd):
            raise CheckpointError(
                f"{where} belongs to job {ck.job_id}, party '{ck.party_id}', round {ck.round}"
            )
        if ck.spec_hash != spec_hash:
            raise CheckpointError(f"{where} was written under another job spec; it was not loaded")
        return ck

    def usable_rounds(self, job_id: str, spec_hash: str, party_id: str) -> dict[int, str]:
        """Each round held, with "" if it can be loaded, else why not."""
        verdict: dict[int, str] = {}
        for rnd in self.rounds(job_id):
            try:
                self.load(job_id, rnd, spec_hash, party_id)
                verdict[rnd] = ""
            except CheckpointError as exc:
                verdict[rnd] = str(exc)
        return verdict


def safe_name(name: str) -> bool:
    """Whether a job (or model) id can name a folder."""
    return bool(_SAFE_JOB.match(name))


def write_atomically(path: Path, data: bytes) -> None:
    """Write `path` (mode 0600) so that a crash leaves either the old or the new file:
    a temporary file, fsync, rename, fsync of the folder."""
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
