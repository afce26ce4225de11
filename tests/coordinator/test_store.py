"""The SQLite job store: state survives reopening; terminal states are final; model
deletions are kept, also in a database an older coordinator wrote."""

from __future__ import annotations

import sqlite3

import pytest
from vfl.contract.states import CANCELLED, SUCCEEDED, TRAINING
from vfl.coordinator.errors import StoreInUse, UnknownJob
from vfl.coordinator.store import JobStore
from vfl.proto import coordinator_pb2 as pb


def test_state_metrics_and_parties_survive_a_restart(tmp_path) -> None:
    # Prepare
    db = tmp_path / "jobs.sqlite"
    store = JobStore(db)
    job = store.create("demo", "job: demo", "{}")
    store.set_state(job, TRAINING, result=pb.JobResult(round=3))
    store.add_metric(job, "bank", "validation", pb.Validated(round=3, metrics={"auc": 0.9}))
    store.register_party("bank", "127.0.0.1:1234", ["breast"])
    store.close()
    # Execute
    reopened = JobStore(db)
    # Assert
    record = reopened.get(job)
    assert record.state == TRAINING and record.result == pb.JobResult(round=3)
    assert reopened.metrics(job, "validation")[0]["metrics"]["auc"] == 0.9
    assert reopened.parties() == {"bank": "127.0.0.1:1234"}
    assert reopened.in_states(TRAINING) == [job]


def test_terminal_states_are_final(tmp_path) -> None:
    store = JobStore(tmp_path / "jobs.sqlite")
    job = store.create("demo", "", "{}")
    assert store.set_state(job, CANCELLED, "user")
    assert not store.set_state(job, SUCCEEDED)
    assert store.get(job).state == CANCELLED and store.get(job).reason == "user"


def test_unknown_job_names_the_fix(tmp_path) -> None:
    with pytest.raises(UnknownJob, match="vfl jobs"):
        JobStore(tmp_path / "jobs.sqlite").get("nope")


def test_a_second_store_on_the_same_database_fails_at_once_naming_the_fix(tmp_path) -> None:
    db = tmp_path / "jobs.sqlite"
    first = JobStore(db)
    with pytest.raises(StoreInUse) as err:
        JobStore(db)
    message = str(err.value)
    assert str(db) in message and "another coordinator" in message and "--db" in message
    first.create("demo", "", "{}")  # the holder works on
    first.close()
    JobStore(db).close()  # released with the first store


def test_a_model_deletion_keeps_its_first_request_and_its_pending_parties(tmp_path) -> None:
    # Prepare
    db = tmp_path / "jobs.sqlite"
    store = JobStore(db)
    assert store.model_deletion("m-1") is None
    # Execute
    first = store.delete_model("m-1", ["bank", "shop"])
    after = store.dropped("m-1", ["bank"])
    again = store.delete_model("m-1", ["bank", "shop"])  # a second delete: nothing reset
    store.close()
    reopened = JobStore(db)
    # Assert
    assert first.pending == ("bank", "shop") and not first.complete
    assert after == again == reopened.model_deletion("m-1")
    assert again.pending == ("shop",) and again.requested_at == first.requested_at
    assert reopened.dropped("m-1", ["shop"]).complete
    assert reopened.model_deletions() == {"m-1": reopened.model_deletion("m-1")}
    assert reopened.dropped("never-deleted", ["bank"]) is None


def test_a_database_of_an_older_coordinator_gains_the_deletions_table(tmp_path) -> None:
    # Prepare: a database with the tables of before model deletions, holding a job
    db = tmp_path / "jobs.sqlite"
    old = sqlite3.connect(db)
    old.executescript(
        "CREATE TABLE jobs (job_id TEXT PRIMARY KEY, name TEXT NOT NULL, spec_yaml TEXT NOT "
        "NULL, spec_json TEXT NOT NULL, state TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '', "
        "created_at REAL NOT NULL, updated_at REAL NOT NULL, result_json TEXT NOT NULL "
        "DEFAULT '{}');"
        "INSERT INTO jobs (job_id, name, spec_yaml, spec_json, state, created_at, updated_at) "
        "VALUES ('old-1', 'old', '', '{}', 'SUCCEEDED', 1, 2);"
    )
    old.close()
    # Execute
    store = JobStore(db)
    store.delete_model("old-1", ["bank"])
    # Assert
    assert store.get("old-1").state == SUCCEEDED
    assert store.model_deletion("old-1").pending == ("bank",)
