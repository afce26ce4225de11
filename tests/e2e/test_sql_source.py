"""A passive party that reads its features from PostgreSQL, with real daemons and a real
server: the same AUC as from the CSV file of the same rows; a kill -9 mid-training, a
changed database, and `vfl resume` reading the snapshot the job began with; the named
errors at PREPARE; and the password nowhere in what the run leaves."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from tests.support.data import FATE
from tests.support.jobs import checkpointed_breast_job
from tests.support.postgres import Postgres
from tests.support.processes import Daemons

pytestmark = pytest.mark.subprocess

HOST = FATE / "breast_hetero_host.csv"
COLUMNS = HOST.read_text().splitlines()[0].split(",")  # id, x0 .. x19
TYPES = {c: "text" if c == "id" else "float8" for c in COLUMNS}  # the table in PostgreSQL
ENV, WRONG_ENV = "VFL_E2E_PGPASS", "VFL_E2E_PGPASS_WRONG"
ENDED = ("SUCCEEDED", "FAILED", "CANCELLED")


def spec(name: str, shop: str, wan: bool = False) -> str:
    """The split breast job (sync CELU: a resume ends exactly as an uninterrupted run), the
    shop reading dataset `shop`; `wan`: ~40 ms a round, time to kill a daemon mid-training."""
    job = checkpointed_breast_job(name, "breast", epochs=5)  # 40 rounds
    job["parties"][1]["data"] = {"dataset": shop}
    if wan:
        job["network"] = {"bandwidth_mbps": 200, "rtt_ms": 40}
    return yaml.safe_dump(job)


def shop_datasets(pg: Postgres) -> dict[str, dict]:
    query = f"SELECT {', '.join(COLUMNS)} FROM shop_rows ORDER BY ord"
    sql = {"format": "sql", "url": pg.url, "password_env": ENV}
    return {
        "csv": {"path": str(HOST)},
        "pg": {**sql, "query": query},
        "down": {**sql, "url": pg.url.replace(f":{pg.port}/", ":1/"), "table": "shop_rows"},
        "broken": {**sql, "query": "SELECT id, nope FROM shop_rows"},
        "noid": {**sql, "query": "SELECT x0, x1 FROM shop_rows"},
        "badpw": {**sql, "table": "shop_rows", "password_env": WRONG_ENV},
    }


@dataclass
class Federation:
    daemons: Daemons
    workdir: Path
    pg: Postgres
    datasets: dict[str, dict[str, dict]]
    outputs: list[str] = field(default_factory=list)  # what the CLI printed

    def run(self, text: str) -> tuple[str, object]:
        with self.daemons.client() as client:
            job_id = client.submit(text)
        return job_id, self.daemons.wait(job_id, lambda v: v.state in ENDED)

    def vfl(self, *args: str):
        out = self.daemons.vfl(*args)
        self.outputs += [out.stdout, out.stderr]
        return out

    def restart(self, party: str) -> None:
        self.daemons.start_party(party, self.datasets[party], audit=self.workdir / "audit")

    def snapshots(self, job_id: str) -> Path:
        return self.workdir / "shop-state" / "snapshots" / job_id

    def manifest(self, job_id: str) -> dict:
        path = self.workdir / "shop-state" / "models" / job_id / "manifest.json"
        return json.loads(path.read_text())


@pytest.fixture(scope="module")
def federation(postgres: Postgres, tmp_path_factory) -> Iterator[Federation]:
    """A coordinator, the bank (labels, CSV) and the shop (its rows as a CSV file and as a
    PostgreSQL table, and datasets that fail), both with a wire audit."""
    postgres.load_csv("shop_rows", HOST, TYPES)
    saved = {k: os.environ.get(k) for k in (ENV, WRONG_ENV)}
    os.environ[ENV], os.environ[WRONG_ENV] = postgres.password, "wrong-" + postgres.password
    workdir = tmp_path_factory.mktemp("sql") / "run"
    workdir.mkdir()
    datasets = {
        "bank": {"breast": {"path": str(FATE / "breast_hetero_guest.csv"), "label": "y"}},
        "shop": shop_datasets(postgres),
    }
    daemons = Daemons(workdir)
    fed = Federation(daemons, workdir, postgres, datasets)
    try:
        daemons.start_coordinator()
        fed.restart("bank")
        fed.restart("shop")
        yield fed
    finally:
        daemons.stop()
        for key, value in saved.items():
            os.environ.pop(key) if value is None else os.environ.__setitem__(key, value)


@pytest.fixture(scope="module")
def uninterrupted(federation: Federation) -> dict[str, tuple[str, object]]:
    """The job over the shop's CSV file, and over the same rows from PostgreSQL."""
    return {shop: federation.run(spec(f"whole-{shop}", shop)) for shop in ("csv", "pg")}


def test_rows_from_postgresql_train_to_the_auc_of_the_same_rows_from_csv(
    federation: Federation, uninterrupted
) -> None:
    (_, from_csv), (job_id, from_sql) = uninterrupted["csv"], uninterrupted["pg"]
    assert from_csv.state == "SUCCEEDED", from_csv.reason
    assert from_sql.state == "SUCCEEDED", from_sql.reason + federation.daemons.logs()
    assert abs(from_sql.result.metrics["auc"] - from_csv.result.metrics["auc"]) <= 1e-6
    digest = federation.manifest(job_id)["snapshots"]["pg"]
    assert len(digest) == 64
    assert not federation.snapshots(job_id).exists()  # removed once the job ended


def test_a_prediction_over_a_sql_dataset_scores_a_snapshot_of_it(
    federation: Federation, uninterrupted
) -> None:
    model, _ = uninterrupted["pg"]
    results = {}
    for shop in ("csv", "pg"):
        data = ("--data", "bank=breast", "--data", f"shop={shop}")
        out = federation.vfl("predict", model, *data, "--json")
        assert out.returncode == 0, out.stderr + federation.daemons.logs()
        results[shop] = json.loads(out.stdout)
    auc = results["csv"]["metrics"]["auc"]
    assert results["pg"]["metrics"]["auc"] == pytest.approx(auc, abs=1e-6)
    assert results["pg"]["prediction"]["scored"] == 569
    job = results["pg"]["job"]
    log = (federation.workdir / "shop.log").read_text()
    assert f"removed the snapshots of job {job} (its rows were read)" in log
    assert not federation.snapshots(job).exists()


def test_a_resume_after_kill_9_reads_the_snapshot_even_though_the_database_changed(
    federation: Federation, uninterrupted
) -> None:
    # Prepare
    _, whole = uninterrupted["pg"]
    daemons = federation.daemons
    with daemons.client() as client:
        job_id = client.submit(spec("crash", "pg", wan=True))
    daemons.wait(job_id, lambda v: v.result.checkpoint_round >= 10)
    before = (federation.snapshots(job_id) / "pg.parquet.sha256").read_text().strip()
    # Execute: kill -9 the shop mid-training, change its rows, start it again, resume
    daemons.kill("shop")
    view = daemons.wait(job_id, lambda v: v.state != "TRAINING")
    assert view.state == "PAUSED", view.reason
    federation.pg.execute("UPDATE shop_rows SET x0 = x0 + 100")
    federation.pg.execute("DELETE FROM shop_rows WHERE ord % 3 = 0")
    federation.restart("shop")
    out = federation.vfl("resume", job_id)
    assert out.returncode == 0, out.stderr
    view = daemons.wait(job_id, lambda v: v.state in ENDED)
    federation.pg.load_csv("shop_rows", HOST, TYPES)  # the rows as they were, for other tests
    # Assert: the rows the job began with, so the uninterrupted run's AUC
    assert view.state == "SUCCEEDED", view.reason + daemons.logs()
    assert view.result.resumed_from >= 10
    assert abs(view.result.metrics["auc"] - whole.result.metrics["auc"]) <= 1e-6
    assert federation.manifest(job_id)["snapshots"] == {"pg": before}
    assert not federation.snapshots(job_id).exists()
    assert "read dataset 'pg' from its snapshot" in (federation.workdir / "shop.log").read_text()


@pytest.mark.parametrize(
    ("dataset", "public", "local"),
    [
        (
            "down",
            "dataset 'down': the party's database cannot be reached; the party must start it "
            "or fix its config",
            "the database at 127.0.0.1:1 cannot be reached",
        ),
        (
            "broken",
            "dataset 'broken': the party's query failed; the party must fix it",
            'its query failed on the database at 127.0.0.1:{port}: column "nope" does not exist',
        ),
        (
            "noid",
            "dataset 'noid': the party's query returns no id column",
            "its query returns no id column 'id' (it returns ['x0', 'x1'])",
        ),
    ],
)
def test_a_database_that_fails_refuses_the_job_at_prepare_with_its_named_error(
    federation: Federation, dataset: str, public: str, local: str
) -> None:
    job_id, view = federation.run(spec(f"bad-{dataset}", dataset))
    assert view.state == "FAILED" and view.result.refused, view.reason
    assert public in view.reason and "127.0.0.1" not in view.reason
    assert local.format(port=federation.pg.port) in (federation.workdir / "shop.log").read_text()
    status = federation.vfl("status", job_id)
    assert status.returncode == 0 and public in status.stdout
    assert not federation.snapshots(job_id).exists()


def test_a_snapshot_changed_under_a_resume_refuses_it_at_prepare(federation: Federation) -> None:
    # Prepare: a job paused by a kill -9 of the shop mid-training
    daemons = federation.daemons
    with daemons.client() as client:
        job_id = client.submit(spec("tamper", "pg", wan=True))
    daemons.wait(job_id, lambda v: v.result.checkpoint_round >= 10)
    daemons.kill("shop")
    assert daemons.wait(job_id, lambda v: v.state != "TRAINING").state == "PAUSED"
    # Execute: its snapshot changes; the shop is back; resume
    snapshot = federation.snapshots(job_id) / "pg.parquet"
    snapshot.write_bytes(snapshot.read_bytes() + b"\n")
    federation.restart("shop")
    assert federation.vfl("resume", job_id).returncode == 0
    view = daemons.wait(job_id, lambda v: v.state in ENDED)
    # Assert
    assert view.state == "FAILED" and view.result.refused, view.reason
    where = f"party 'shop': the snapshot of dataset 'pg' (job {job_id})"
    assert f"{where} changed since the checkpoint of round" in view.reason
    assert "restore the file, or submit the job again" in view.reason
    assert str(snapshot) not in view.reason


def test_no_credential_appears_in_any_log_error_result_or_audit(federation: Federation) -> None:
    # Prepare: a refused password too
    job_id, view = federation.run(spec("badpw", "badpw"))
    assert view.state == "FAILED" and "refused its credential" in view.reason, view.reason
    assert f"password_env {WRONG_ENV}" in (federation.workdir / "shop.log").read_text()
    # Execute: everything the run printed, stored and logged
    federation.vfl("jobs")
    with federation.daemons.client() as client:
        views = [str(client.get(j.job_id)) for j in client.jobs()]
    shown = "\n".join(federation.outputs + views)
    files = [p for p in federation.workdir.rglob("*") if p.is_file()]
    # Assert: the logs, the job store, the audit, state and the outputs hold neither password
    assert any(p.suffix == ".log" for p in files) and (federation.workdir / "audit").is_dir()
    assert any(p.name == "jobs.sqlite" for p in files)
    for secret in (federation.pg.password, "wrong-" + federation.pg.password):
        assert secret not in shown
        for path in files:
            assert secret.encode() not in path.read_bytes(), path
