"""Datasets read from PostgreSQL (`format: sql`): the config's fields, the query streamed
into a Parquet snapshot with its types, the snapshot folder, and the named errors, against
a real server (the `postgres` fixture; these tests skip where it cannot start)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from vfl.contract.errors import SpecError
from vfl.contract.spec import TableSource, parse_spec_text
from vfl.party.config import parse_party_config
from vfl.party.datasets import resolve_dataset
from vfl.party.errors import CheckpointError, ConfigError, DataError, JobError, PartyError
from vfl.party.job import PartyJob
from vfl.party.state import StateDir
from vfl.party.state.model_store import Manifest
from vfl.party.state.snapshots import Snapshots, file_sha256, sweep
from vfl.party.tables.describe import describe_dataset
from vfl.party.tables.load import read_raw
from vfl.party.tables.sql import write_parquet

from tests.support.postgres import Postgres

ENV = "VFL_TEST_PGPASS"


def sql_source(server: Postgres, **fields: object) -> TableSource:
    given = {"format": "sql", "url": server.url, "password_env": ENV, **fields}
    return TableSource.model_validate(given)


@pytest.fixture
def pg(postgres: Postgres, monkeypatch: pytest.MonkeyPatch) -> Postgres:
    """The server, its password in the environment variable the datasets name, and a
    table `people` of every kind of column."""
    monkeypatch.setenv(ENV, postgres.password)
    postgres.execute("DROP TABLE IF EXISTS people")
    postgres.execute(
        "CREATE TABLE people (id int, amount numeric, score float8, n bigint, flag bool, "
        "city text, born date)"
    )
    postgres.execute(
        "INSERT INTO people SELECT i, i * 1.5, i / 4.0, i::bigint * 1000000000, i % 2 = 0, "
        "'c' || (i % 3), date '2000-01-01' + i FROM generate_series(1, 10) AS i"
    )
    postgres.execute("INSERT INTO people (id, city) VALUES (11, NULL)")
    return postgres


def assert_no_secret(exc: BaseException, password: str) -> None:
    """Neither the message, the public form, nor a chained exception shows the password."""
    assert exc.__cause__ is None and (exc.__context__ is None or exc.__suppress_context__)
    shown = "".join(traceback.format_exception(exc)) + getattr(exc, "public", "")
    assert password not in shown


# --- the config --------------------------------------------------------------------


def test_a_sql_dataset_in_a_party_config_resolves_its_password_file() -> None:
    raw = {
        "party": "shop",
        "datasets": {
            "crm": {
                "format": "sql",
                "url": "postgresql://shop@db:5432/crm",
                "table": "customers",
                "password_file": "secrets/crm.pw",
            }
        },
    }
    source = parse_party_config(raw, Path("/configs")).datasets["crm"]
    assert source.password_file == "/configs/secrets/crm.pw" and source.path == ""
    assert (source.format, source.id, source.query) == ("sql", "id", None)


def test_a_local_federation_takes_a_sql_dataset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`vfl.local_federation` writes it into the party's config (`vfl run` cannot: a job
    spec never names a database)."""
    from vfl.local.federation import _datasets

    monkeypatch.chdir(tmp_path)
    crm = {"format": "sql", "url": "postgresql://shop@db/crm", "table": "t", "password_file": "pw"}
    _, datasets = _datasets({"shop": {"crm": crm}})
    assert datasets["shop"]["crm"].password_file == str(tmp_path / "pw")
    assert datasets["shop"]["crm"].path == ""


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        (
            {"url": "postgresql://shop:hunter2@db/crm", "query": "SELECT 1"},
            "'datasets.d.url' holds a password; remove it from the url and use the credential "
            "setting: password_env",
        ),
        ({"url": "postgresql://shop@db/crm?password=hunter2", "query": "q"}, "holds a password"),
        ({"url": "postgresql://shop@db/crm"}, "'datasets.d.query' or 'table' is needed"),
        ({"url": "postgresql://db/crm", "query": "q", "table": "t"}, "(exactly one)"),
        ({"url": "mysql://db/crm", "query": "q"}, "must start with postgresql://"),
        ({"query": "q"}, "'datasets.d.url' is required with format: sql"),
        ({"url": "postgresql://db/c", "query": "q", "path": "x.csv"}, "'datasets.d.path' is for"),
        (
            {"url": "postgresql://db/c", "query": "q", "password_env": "A", "password_file": "f"},
            "'datasets.d.password_env' or 'password_file' names the password, not both",
        ),
    ],
)
def test_bad_sql_datasets_are_refused_at_config_load(fields: dict, fragment: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_party_config({"party": "p", "datasets": {"d": {"format": "sql", **fields}}}, Path())
    assert fragment in str(err.value) and "hunter2" not in str(err.value)


def test_database_fields_on_a_file_dataset_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"'datasets.d.query' is for format: sql, not csv"):
        parse_party_config({"party": "p", "datasets": {"d": {"path": "x", "query": "q"}}}, Path())


@pytest.mark.parametrize(
    "data",
    [
        "{dataset: crm, format: sql}",
        "{path: x.csv, url: 'postgresql://db/crm'}",
        "{dataset: crm, query: SELECT 1}",
        "{dataset: crm, password_env: PGPASS}",
    ],
)
def test_a_job_spec_cannot_name_a_database_a_query_or_a_credential(data: str) -> None:
    text = f"job: j\nparties:\n  - {{id: a, role: active, data: {data}}}\n"
    text += "  - {id: b, role: passive, data: {dataset: d}}\n"
    with pytest.raises(SpecError) as err:
        parse_spec_text(text)
    assert "cannot be in a job spec" in str(err.value)
    assert "`vfl run` takes files only" in str(err.value)


def test_a_job_cannot_change_a_sql_datasets_format_and_needs_a_state_directory() -> None:
    spec = "job: j\nparties:\n  - {id: bank, role: active, data: {dataset: d}}\n"
    spec += "  - {id: shop, role: passive, data: {dataset: crm%s}}\n"
    crm = {"crm": TableSource(format="sql", url="postgresql://db/crm", table="t")}
    with pytest.raises(JobError, match="a job cannot change its format to csv"):
        resolve_dataset(parse_spec_text(spec % ", format: csv"), "shop", crm)
    job = PartyJob("j-1", parse_spec_text(spec % ""), "shop", crm, state=None)
    with pytest.raises(ConfigError, match="party 'shop' keeps no state directory"):
        job.prepare()


def test_a_manifest_written_before_snapshots_still_loads() -> None:
    old = (
        '{"model_id": "j-1", "name": "n", "party_id": "p", "role": "passive", "protocol": '
        '"split", "columns": [], "spec_json": "{}", "spec_hash": "h"}'
    )
    assert Manifest.model_validate_json(old).snapshots == {}


# --- the query into Parquet --------------------------------------------------------------


def test_the_query_streams_into_parquet_with_arrow_types(pg: Postgres, tmp_path: Path) -> None:
    # Prepare: batches of 4 rows, so that the 11 rows take three row groups
    path = tmp_path / "people.parquet"
    # Execute
    rows = write_parquet(sql_source(pg, table="people"), "people", path, batch_rows=4)
    # Assert
    parquet = pq.ParquetFile(path)
    assert rows == 11 and parquet.metadata.num_row_groups == 3
    table = parquet.read()
    assert table.schema == pa.schema(
        [("id", pa.string())]
        + [(c, pa.float64()) for c in ("amount", "score", "n", "flag")]
        + [("city", pa.string()), ("born", pa.string())]
    )
    first = table.slice(0, 1).to_pylist()[0]
    assert first == {
        "id": "1",
        "amount": 1.5,
        "score": 0.25,
        "n": 1e9,
        "flag": 0.0,
        "city": "c1",
        "born": "2000-01-02",
    }
    assert table.column("city").null_count == 1 and table.column("amount").null_count == 1


def test_a_snapshot_reads_through_the_table_reader_as_the_same_rows_in_csv(
    pg: Postgres, tmp_path: Path
) -> None:
    # Prepare: the same rows as a CSV file
    csv = tmp_path / "people.csv"
    csv.write_text("id,amount,city\n" + "".join(f"{i},{i * 1.5},c{i % 3}\n" for i in range(1, 11)))
    query = "SELECT id, amount, city FROM people WHERE id <= 10 ORDER BY id"
    folder = Snapshots(StateDir(tmp_path / "state"), "j-1", "shop")
    # Execute
    digest = folder.take("people", sql_source(pg, query=query))
    from_sql = read_raw(folder.source("people", sql_source(pg, query=query)), "people")
    from_csv = read_raw(TableSource(path=str(csv)), "people")
    # Assert
    path = folder.path("people")
    assert digest == file_sha256(path)
    assert (path.parent / "people.parquet.sha256").read_text() == digest + "\n"
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert list(from_sql.ids) == list(from_csv.ids)
    for a, b in zip(from_sql.columns, from_csv.columns, strict=True):
        assert a.name == b.name and a.words == b.words
        assert (a.values is None) == (b.values is None)
        if a.values is not None:
            assert a.values.tolist() == b.values.tolist()


def test_describe_runs_the_query(pg: Postgres) -> None:
    rows, columns = describe_dataset(sql_source(pg, table="people"), "people")
    kinds = {c.name: c.type for c in columns}
    assert rows == 11 and kinds["id"] == "id" and kinds["amount"] == "numeric"
    assert kinds["city"] == "categorical"


# --- named errors ----------------------------------------------------------------------------


def test_an_unreachable_database_names_host_and_port_and_the_fix(
    pg: Postgres, tmp_path: Path
) -> None:
    url = pg.url.replace(f":{pg.port}/", ":1/")
    with pytest.raises(DataError) as err:
        write_parquet(sql_source(pg, url=url, table="people"), "crm", tmp_path / "x.parquet")
    assert "dataset 'crm': the database at 127.0.0.1:1 cannot be reached" in str(err.value)
    assert "start it, or fix the host and port in 'url'" in str(err.value)
    assert err.value.public == (
        "dataset 'crm': the party's database cannot be reached; the party must start it or "
        "fix its config"
    )
    assert_no_secret(err.value, pg.password)


def test_a_refused_password_is_a_config_error(
    pg: Postgres, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = "wrong-" + pg.password
    monkeypatch.setenv(ENV, wrong)
    with pytest.raises(ConfigError) as err:
        write_parquet(sql_source(pg, table="people"), "crm", tmp_path / "x.parquet")
    assert "refused user 'vfl'" in str(err.value) and f"password_env {ENV}" in str(err.value)
    assert "127.0.0.1" not in err.value.public and "refused its credential" in err.value.public
    assert_no_secret(err.value, wrong)


def test_an_unset_credential_names_the_variable_or_the_file(pg: Postgres, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="password_env names VFL_TEST_UNSET, which is not set"):
        write_parquet(
            sql_source(pg, table="people", password_env="VFL_TEST_UNSET"), "crm", tmp_path / "x"
        )
    missing = tmp_path / "none.pw"
    with pytest.raises(ConfigError, match="its password_file .* cannot be read"):
        source = sql_source(pg, table="people", password_env=None, password_file=str(missing))
        write_parquet(source, "crm", tmp_path / "x")


def test_a_password_file_is_read(pg: Postgres, tmp_path: Path) -> None:
    secret = tmp_path / "crm.pw"
    secret.write_text(pg.password + "\n")
    source = sql_source(pg, table="people", password_env=None, password_file=str(secret))
    assert write_parquet(source, "crm", tmp_path / "x.parquet") == 11


@pytest.mark.parametrize(
    ("query", "local", "public"),
    [
        (
            "SELECT nope FROM missing",
            "its query failed on the database at 127.0.0.1:{port}: "
            'relation "missing" does not exist',
            "dataset 'crm': the party's query failed; the party must fix it",
        ),
        (
            "SELECT amount, city FROM people",
            "its query returns no id column 'id' (it returns ['amount', 'city'])",
            "dataset 'crm': the party's query returns no id column; the party must fix its "
            "query or its 'id' setting",
        ),
        (
            "SELECT id, city AS id FROM people",
            "returns column(s) ['id'] more than once",
            "dataset 'crm': the party's query returns a column twice",
        ),
        (
            "SELECT NULL::int AS id, amount FROM people",
            "returns a row whose id 'id' is NULL",
            "dataset 'crm': the party's query returns a row without an id",
        ),
        (
            "DELETE FROM people RETURNING id",
            "its query failed",
            "dataset 'crm': the party's query failed; the party must fix it",
        ),
    ],
)
def test_a_failing_query_is_a_data_error_whose_public_form_names_only_the_dataset(
    pg: Postgres, tmp_path: Path, query: str, local: str, public: str
) -> None:
    with pytest.raises(DataError) as err:
        write_parquet(sql_source(pg, query=query), "crm", tmp_path / "x.parquet")
    assert local.format(port=pg.port) in str(err.value) and err.value.public == public
    assert_no_secret(err.value, pg.password)
    with pg.connect() as conn:  # read-only: the DELETE changed nothing
        assert conn.execute("SELECT count(*) FROM people").fetchone() == (11,)


def test_a_job_reading_a_sql_dataset_outside_a_snapshot_is_told_why(pg: Postgres) -> None:
    with pytest.raises(DataError, match="is read from a database: jobs and predictions read it"):
        read_raw(sql_source(pg, table="people"), "crm")


# --- the snapshot folder -----------------------------------------------------------------


def test_a_changed_or_missing_snapshot_is_named_without_its_path(tmp_path: Path) -> None:
    # Prepare: a snapshot file (any bytes) and its recorded hash
    folder = Snapshots(StateDir(tmp_path), "j-1", "shop")
    folder.folder.mkdir(parents=True)
    path = folder.path("crm")
    path.write_bytes(b"rows")
    recorded = file_sha256(path)
    assert folder.verify("crm", recorded, 10) == recorded
    # Execute: the file changes, then goes
    path.write_bytes(b"other rows")
    with pytest.raises(CheckpointError) as changed:
        folder.verify("crm", recorded, 10)
    path.unlink()
    with pytest.raises(CheckpointError) as missing:
        folder.verify("crm", recorded, 10)
    with pytest.raises(CheckpointError) as unrecorded:
        folder.verify("crm", None, 10)
    # Assert
    where = "party 'shop': the snapshot of dataset 'crm' (job j-1)"
    assert str(changed.value).startswith(f"{where}, {path}, changed since the checkpoint of")
    assert changed.value.public.startswith(f"{where} changed since the checkpoint of round 10;")
    assert "restore the file, or submit the job again" in changed.value.public
    assert str(path) not in changed.value.public + missing.value.public
    assert missing.value.public.startswith(f"{where} is missing;")
    assert "is not in its checkpoint of round 10" in str(unrecorded.value)


def test_a_party_without_a_state_directory_cannot_keep_a_snapshot() -> None:
    with pytest.raises(ConfigError, match="keeps no state directory, where a job keeps the rows"):
        Snapshots(None, "j-1", "shop")


def test_sweep_removes_snapshots_unused_for_days_except_held_jobs(tmp_path: Path) -> None:
    state = StateDir(tmp_path)
    old = time.time() - 8 * 86400
    for job in ("j-old", "j-held", "j-new"):
        folder = Snapshots(state, job, "shop").folder
        folder.mkdir(parents=True)
        (folder / "crm.parquet").write_bytes(b"rows")
        if job != "j-new":
            os.utime(folder, (old, old))
    assert sweep(state, {"j-held"}) == ["j-old"]
    assert sorted(p.name for p in (tmp_path / "snapshots").iterdir()) == ["j-held", "j-new"]


def test_every_party_error_here_has_a_public_form(pg: Postgres, tmp_path: Path) -> None:
    """The errors above are PartyErrors (the servicer sends only their public form)."""
    with pytest.raises(PartyError):
        write_parquet(sql_source(pg, query="SELECT 1/0 AS id"), "crm", tmp_path / "x")


@pytest.mark.parametrize("module", ["vfl.party.tables.sql", "vfl.party.tables.sql_lookup"])
def test_the_sql_modules_import_neither_grpc_nor_the_driver(module: str) -> None:
    """The driver (an optional extra) loads when a sql dataset is read, not before."""
    code = f"import sys, {module}; print('grpc' in sys.modules, 'psycopg' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
