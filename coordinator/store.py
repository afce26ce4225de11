"""The job store: jobs, their state, per-round metrics, the party registry and model
deletions in SQLite.

Every write is a committed transaction, so a coordinator restart loses nothing. Tables are
created if missing when a store opens, so a database written by an older coordinator
gains the newer tables (`model_deletions`) and keeps its jobs. One
connection guarded by a lock (SQLite serialises writers anyway). A store holds an
exclusive lock on `<db>.lock` for its life: a second coordinator on the same database
would launch and end the same jobs twice, so it fails at once (`StoreInUse`).
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from google.protobuf import json_format
from google.protobuf.message import Message
from vfl.contract.states import SUBMITTED, TERMINAL, JobState, state_from_name, state_name
from vfl.coordinator.errors import StoreInUse, UnknownJob
from vfl.proto import coordinator_pb2 as pb
from vfl.rpc.serde import to_plain

_TERMINAL_NAMES = tuple(state_name(s) for s in sorted(TERMINAL))

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
  job_id TEXT PRIMARY KEY, name TEXT NOT NULL, spec_yaml TEXT NOT NULL,
  spec_json TEXT NOT NULL, state TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '',
  created_at REAL NOT NULL, updated_at REAL NOT NULL, result_json TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS metrics (
  job_id TEXT NOT NULL, party_id TEXT NOT NULL, event TEXT NOT NULL, round INTEGER,
  ts REAL NOT NULL, payload_json TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS metrics_job ON metrics(job_id, event);
CREATE TABLE IF NOT EXISTS parties (
  party_id TEXT PRIMARY KEY, address TEXT NOT NULL, datasets_json TEXT NOT NULL,
  last_seen REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS model_deletions (
  model_id TEXT PRIMARY KEY, requested_at REAL NOT NULL, pending_json TEXT NOT NULL
);
"""


@dataclass(frozen=True)
class JobRecord:
    job_id: str
    name: str
    spec_yaml: str
    spec_json: str
    state: JobState
    reason: str
    created_at: float
    updated_at: float
    result: pb.JobResult

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL


@dataclass(frozen=True)
class PartyRecord:
    """A registered party: where it listens, the datasets it exposes, and when it last
    registered."""

    party_id: str
    address: str
    datasets: tuple[str, ...]
    registered_at: float


@dataclass(frozen=True)
class ModelDeletion:
    """A delete of model `model_id` (a training job's id), requested at `requested_at`;
    `pending` are the parties that have not yet confirmed they dropped their part."""

    model_id: str
    requested_at: float
    pending: tuple[str, ...]

    @property
    def complete(self) -> bool:
        return not self.pending


class JobStore:
    """The job database at `path`, held exclusively until `close()`.

    Raises:
        StoreInUse: another process (or store) holds the database.
    """

    def __init__(self, path: str | Path) -> None:
        self._lock = threading.Lock()
        self._owner = _hold(Path(path))
        try:
            self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
        except BaseException:
            self._owner.close()
            raise

    def close(self) -> None:
        with self._lock:
            self._db.close()
            self._owner.close()  # releases the database to the next coordinator

    # --- jobs ------------------------------------------------------------------------

    def create(self, name: str, spec_yaml: str, spec_json: str) -> str:
        job_id = f"{name}-{uuid.uuid4().hex[:8]}"
        now = time.time()
        with self._lock:
            self._db.execute(
                "INSERT INTO jobs (job_id, name, spec_yaml, spec_json, state, created_at, "
                "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (job_id, name, spec_yaml, spec_json, state_name(SUBMITTED), now, now),
            )
        return job_id

    def get(self, job_id: str) -> JobRecord:
        with self._lock:
            row = self._db.execute(
                "SELECT job_id, name, spec_yaml, spec_json, state, reason, created_at, "
                "updated_at, result_json FROM jobs WHERE job_id = ?",
                (job_id,),
            ).fetchone()
        if row is None:
            raise UnknownJob(f"no job '{job_id}'; list jobs with `vfl jobs`")
        result = json_format.Parse(row[8], pb.JobResult())
        job_id, name, spec_yaml, spec_json, state, reason, created, updated = row[:8]
        return JobRecord(
            job_id,
            name,
            spec_yaml,
            spec_json,
            state_from_name(state),
            reason,
            created,
            updated,
            result,
        )

    def jobs(self) -> list[JobRecord]:
        with self._lock:
            ids = [r[0] for r in self._db.execute("SELECT job_id FROM jobs ORDER BY created_at")]
        return [self.get(i) for i in ids]

    def count_by_state(self) -> dict[str, int]:
        """How many jobs are in each state, by the state's name ("TRAINING")."""
        with self._lock:
            rows = self._db.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall()
        return {state: count for state, count in rows}

    def in_states(self, *states: JobState) -> list[str]:
        marks = ",".join("?" * len(states))
        names = [state_name(s) for s in states]
        with self._lock:
            return [
                r[0]
                for r in self._db.execute(
                    f"SELECT job_id FROM jobs WHERE state IN ({marks}) ORDER BY created_at", names
                )
            ]

    def set_state(
        self,
        job_id: str,
        state: JobState,
        reason: str = "",
        result: pb.JobResult | None = None,
        expect: JobState | None = None,
    ) -> bool:
        """Move a job to `state` unless it is already terminal (or, with `expect`, unless it
        is in another state than that); returns True if it moved."""
        only = "" if expect is None else " AND state = ?"
        with self._lock:
            cur = self._db.execute(
                "UPDATE jobs SET state = ?, reason = CASE WHEN ? = '' THEN reason ELSE ? END, "
                "updated_at = ?, result_json = COALESCE(?, result_json) "
                f"WHERE job_id = ? AND state NOT IN {_TERMINAL_NAMES}{only}",
                (
                    state_name(state),
                    reason,
                    reason,
                    time.time(),
                    None if result is None else _json(result),
                    job_id,
                    *(() if expect is None else (state_name(expect),)),
                ),
            )
            return cur.rowcount == 1

    def update_result(self, job_id: str, result: pb.JobResult) -> None:
        with self._lock:
            self._db.execute(
                "UPDATE jobs SET result_json = ?, updated_at = ? WHERE job_id = ?",
                (_json(result), time.time(), job_id),
            )

    # --- metrics ---------------------------------------------------------------------

    def add_metric(
        self, job_id: str, party_id: str, event: str, report: Message, at: float | None = None
    ) -> None:
        """Keep one progress report (a `RoundDone` or `Validated`) of a party, dated `at`
        (unix time its event happened; default now)."""
        rnd = getattr(report, "round", None)
        with self._lock:
            self._db.execute(
                "INSERT INTO metrics (job_id, party_id, event, round, ts, payload_json) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (
                    job_id,
                    party_id,
                    event,
                    rnd if isinstance(rnd, int) else None,
                    time.time() if at is None else at,
                    json.dumps(to_plain(report)),
                ),
            )

    def metrics(self, job_id: str, event: str) -> list[dict]:
        with self._lock:
            rows = self._db.execute(
                "SELECT party_id, ts, payload_json FROM metrics WHERE job_id = ? AND event = ? "
                "ORDER BY rowid",
                (job_id, event),
            ).fetchall()
        return [{"party": p, "ts": ts, **json.loads(j)} for p, ts, j in rows]

    # --- parties ---------------------------------------------------------------------

    def register_party(self, party_id: str, address: str, datasets: list[str]) -> None:
        with self._lock:
            self._db.execute(
                "INSERT INTO parties (party_id, address, datasets_json, last_seen) "
                "VALUES (?, ?, ?, ?) ON CONFLICT(party_id) DO UPDATE SET address = "
                "excluded.address, datasets_json = excluded.datasets_json, "
                "last_seen = excluded.last_seen",
                (party_id, address, json.dumps(datasets), time.time()),
            )

    def registrations(self) -> dict[str, tuple[str, float]]:
        """Every registered party: its address and when it last registered (unix time)."""
        with self._lock:
            rows = self._db.execute("SELECT party_id, address, last_seen FROM parties").fetchall()
        return {p: (address, seen) for p, address, seen in rows}

    def parties(self) -> dict[str, str]:
        with self._lock:
            return dict(self._db.execute("SELECT party_id, address FROM parties").fetchall())

    def party_records(self) -> list[PartyRecord]:
        """Every registered party, by id."""
        with self._lock:
            rows = self._db.execute(
                "SELECT party_id, address, datasets_json, last_seen FROM parties ORDER BY party_id"
            ).fetchall()
        return [PartyRecord(p, a, tuple(json.loads(d)), t) for p, a, d, t in rows]

    # --- model deletions ---------------------------------------------------------------

    def delete_model(self, model_id: str, parties: list[str]) -> ModelDeletion:
        """Record that model `model_id` is deleted, pending at `parties`; a model deleted
        before keeps its first request and the parties still pending then."""
        with self._lock:
            found = self._deletion(model_id)
            if found is not None:
                return found
            deletion = ModelDeletion(model_id, time.time(), tuple(parties))
            self._db.execute(
                "INSERT INTO model_deletions (model_id, requested_at, pending_json) "
                "VALUES (?, ?, ?)",
                (model_id, deletion.requested_at, json.dumps(parties)),
            )
            return deletion

    def model_deletion(self, model_id: str) -> ModelDeletion | None:
        """The delete of `model_id`; None if it was never deleted."""
        with self._lock:
            return self._deletion(model_id)

    def model_deletions(self) -> dict[str, ModelDeletion]:
        with self._lock:
            rows = self._db.execute(
                "SELECT model_id, requested_at, pending_json FROM model_deletions"
            ).fetchall()
        return {r[0]: ModelDeletion(r[0], r[1], tuple(json.loads(r[2]))) for r in rows}

    def dropped(self, model_id: str, parties: list[str]) -> ModelDeletion | None:
        """`parties` confirmed they hold no part of `model_id` any more; returns the
        deletion with them no longer pending (None if the model was never deleted)."""
        with self._lock:
            found = self._deletion(model_id)
            if found is None:
                return None
            pending = [p for p in found.pending if p not in parties]
            self._db.execute(
                "UPDATE model_deletions SET pending_json = ? WHERE model_id = ?",
                (json.dumps(pending), model_id),
            )
            return ModelDeletion(model_id, found.requested_at, tuple(pending))

    def _deletion(self, model_id: str) -> ModelDeletion | None:
        row = self._db.execute(
            "SELECT requested_at, pending_json FROM model_deletions WHERE model_id = ?",
            (model_id,),
        ).fetchone()
        return None if row is None else ModelDeletion(model_id, row[0], tuple(json.loads(row[1])))


def _hold(db: Path) -> IO[str]:
    """Take the exclusive lock of the database `db` (the lock file names the holder's
    pid); it lasts until the returned file is closed.

    Raises:
        StoreInUse: the lock is held (by another coordinator).
    """
    lock = db.with_name(db.name + ".lock")
    fh = open(lock, "a+")  # noqa: SIM115 - open for the store's life
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.seek(0)
        holder = fh.read().strip()
        fh.close()
        who = f"another coordinator (pid {holder})" if holder.isdigit() else "another coordinator"
        raise StoreInUse(
            f"job database '{db}' is in use: {who} is running with it (it holds {lock}); "
            "stop that coordinator, or start this one with another --db"
        ) from None
    fh.truncate(0)
    fh.write(f"{os.getpid()}\n")
    fh.flush()
    return fh


def _json(message: Message) -> str:
    return json_format.MessageToJson(message, preserving_proto_field_name=True, indent=None)
