"""A party's snapshots of its sql datasets: the rows a job read from a database, kept so
that a resume reads the same rows.

    <state_dir>/snapshots/<job_id>/<dataset>.parquet          the query's rows (0600)
    <state_dir>/snapshots/<job_id>/<dataset>.parquet.sha256   the file's SHA-256 (hex)

A job takes its snapshots at PREPARE (`Snapshots.take`: the dataset's query streamed into
a Parquet file by `party.tables.sql.write_parquet`), records their hashes in its checkpoints and
its model manifest, and a resumed job reads them again once `Snapshots.verify` found each
file unchanged; it never queries the database again. The table reader reads a snapshot
as the Parquet dataset `Snapshots.source` gives.

Cleanup: a job's snapshots are removed once it trained to the end at this party (the
manifest keeps their hashes), once a prediction has read its rows, and when the PREPARE of
a fresh job fails. A job that stopped otherwise (paused, cancelled, failed at another
party, its daemon killed) keeps them for `vfl resume`; `sweep` removes those unused for
`KEEP_DAYS` days (the daemon calls it at each PREPARE), with a log line for each.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import time
from collections.abc import Collection
from pathlib import Path

from vfl.contract.spec import TableSource
from vfl.party.errors import CheckpointError, ConfigError
from vfl.party.state.store import StateDir, safe_name, write_atomically
from vfl.party.tables.sql import as_parquet, write_parquet

log = logging.getLogger(__name__)

KEEP_DAYS = 7.0  # a stopped job's snapshots are removed after this long unused


def file_sha256(path: Path) -> str:
    """SHA-256 (hex) of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class Snapshots:
    """The snapshots of job `job_id` at party `party_id`, in the party's state directory.

    Raises:
        ConfigError: the party keeps no state directory to hold them.
        CheckpointError: a job id that cannot name a folder.
    """

    def __init__(self, state: StateDir | None, job_id: str, party_id: str) -> None:
        if state is None:
            raise ConfigError(
                f"party '{party_id}' keeps no state directory, where a job keeps the rows it "
                "reads from a database (its snapshot); restart the daemon with --state-dir DIR"
            )
        if not safe_name(job_id):
            raise CheckpointError(f"job id {job_id!r} cannot name a snapshot folder")
        self.folder = state.root / "snapshots" / job_id
        self.job_id, self.party_id = job_id, party_id

    def path(self, dataset: str) -> Path:
        """Where dataset `dataset`'s snapshot is (a name that cannot name a file: by hash)."""
        name = dataset if safe_name(dataset) else "dataset-" + _short_hash(dataset)
        return self.folder / f"{name}.parquet"

    def take(self, dataset: str, source: TableSource) -> str:
        """Run dataset `dataset`'s query (`source`, format sql) into its snapshot, written
        under a temporary name and renamed once complete; returns its SHA-256, which is
        also written beside it.

        Raises:
            ConfigError, DataError: the database fails (`party.tables.sql`).
        """
        began = time.monotonic()
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self.path(dataset)
        tmp = path.with_name(path.name + ".tmp")
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))  # 0600 first
        try:
            rows = write_parquet(source, dataset, tmp)
            with tmp.open("rb+") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        digest = file_sha256(path)
        write_atomically(path.with_name(path.name + ".sha256"), f"{digest}\n".encode())
        log.info(
            "party %s: dataset '%s': %d rows from its database, snapshot in %.2f s (sha256 %s)",
            self.party_id,
            dataset,
            rows,
            time.monotonic() - began,
            digest[:12],
        )
        return digest

    def read_source(
        self,
        dataset: str,
        source: TableSource,
        taken: dict[str, str],
        recorded: dict[str, str] | None,
        rnd: int,
    ) -> TableSource:
        """What the table reader reads for sql dataset `dataset` of a job: its snapshot,
        taken now (a fresh job: `recorded` None), or on a resume after round `rnd` the one
        taken when the job began, checked against the checkpoint's hashes `recorded`, with
        no query. `taken` gets its hash (a dataset already there is not read again: a
        test dataset may be the training one)."""
        if dataset not in taken:
            if recorded is None:
                taken[dataset] = self.take(dataset, source)
            else:
                taken[dataset] = self.verify(dataset, recorded.get(dataset), rnd)
                log.info("party %s: read dataset '%s' from its snapshot", self.party_id, dataset)
        return self.source(dataset, source)

    def source(self, dataset: str, source: TableSource) -> TableSource:
        """What the table reader reads for sql dataset `dataset`: its snapshot, as Parquet
        with `source`'s column settings."""
        return as_parquet(source, self.path(dataset))

    def verify(self, dataset: str, expected: str | None, rnd: int) -> str:
        """The SHA-256 of dataset `dataset`'s snapshot, checked to be `expected` (what the
        checkpoint of round `rnd` recorded), before a resume reads it.

        Raises:
            CheckpointError: the checkpoint records none, or the file is missing or
                changed (names the party, the dataset and the fix; the public form no path).
        """
        where = f"party '{self.party_id}': the snapshot of dataset '{dataset}' (job {self.job_id})"
        fix = (
            "a resume reads the rows the job began with, never the database again: restore "
            "the file, or submit the job again (a new job reads the database afresh)"
        )
        if expected is None:
            raise CheckpointError(
                f"{where} is not in its checkpoint of round {rnd} (the dataset was not read "
                "from a database when the job began); submit the job again"
            )
        path = self.path(dataset)
        if not path.is_file():
            raise CheckpointError(
                f"{where}, {path}, is missing; {fix}", f"{where} is missing; {fix}"
            )
        actual = file_sha256(path)
        if actual != expected:
            raise CheckpointError(
                f"{where}, {path}, changed since the checkpoint of round {rnd} (SHA-256 "
                f"{actual[:12]}..., the checkpoint's {expected[:12]}...); {fix}",
                f"{where} changed since the checkpoint of round {rnd}; {fix}",
            )
        os.utime(self.folder)  # `sweep` counts from the last use
        return actual

    def drop(self, why: str) -> None:
        """Remove this job's snapshots (`why`: for the log line)."""
        if self.folder.is_dir():
            shutil.rmtree(self.folder, ignore_errors=True)
            log.info(
                "party %s: removed the snapshots of job %s (%s)", self.party_id, self.job_id, why
            )


def sweep(state: StateDir, held: Collection[str], keep_days: float = KEEP_DAYS) -> list[str]:
    """Remove the snapshots of jobs not in `held` (those this daemon holds now) unused for
    `keep_days` days; returns those jobs' ids."""
    root = state.root / "snapshots"
    if not root.is_dir():
        return []
    cutoff = time.time() - keep_days * 86400
    removed = []
    for folder in sorted(root.iterdir()):
        if folder.name in held or not folder.is_dir() or folder.stat().st_mtime >= cutoff:
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder.name)
        log.info("removed the snapshots of job %s: unused for %g days", folder.name, keep_days)
    return removed


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]
