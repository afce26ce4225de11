"""The SQLite job store: state survives reopening; terminal states are final."""

from __future__ import annotations

import pytest

from coordinator.errors import StoreInUse, UnknownJob
from coordinator.states import CANCELLED, SUCCEEDED, TRAINING
from coordinator.store import JobStore
from proto import coordinator_pb2 as pb


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
