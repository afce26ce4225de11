"""Online scoring's lookups of a `format: sql` dataset by id, against a real server (the
`postgres` fixture; these tests skip where it cannot start): the rows of the ids asked
only, bound as a parameter, typed and preprocessed as a snapshot of the same rows; a
pool that keeps its connections and reconnects once the database is back; a statement
timeout; and the named errors, without the password or (public) the host."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from vfl.contract.spec import TableSource, parse_spec
from vfl.party.datasets import Dataset
from vfl.party.errors import DataError, TableUnavailable
from vfl.party.inference.model import LoadedModel
from vfl.party.inference.rows import Rows, SqlRows, TableRows, serving_table
from vfl.party.state import StateDir
from vfl.party.tables.sql import write_parquet
from vfl.party.tables.sql_lookup import Lookup

from tests.party.tables.test_sql import ENV, assert_no_secret, sql_source
from tests.support.data import FATE
from tests.support.harness import run_inprocess
from tests.support.postgres import Postgres

HOST = FATE / "breast_hetero_host.csv"
IDS = [line.split(",", 1)[0] for line in HOST.read_text().splitlines()[1:]]


@pytest.fixture
def pg(postgres: Postgres, monkeypatch: pytest.MonkeyPatch) -> Postgres:
    monkeypatch.setenv(ENV, postgres.password)
    return postgres


@pytest.fixture(scope="module")
def people(postgres: Postgres) -> Postgres:
    """Table `people`: the breast host ids (int8) with columns of every kind and NULLs."""
    postgres.load_csv("people_src", HOST, {c: "float8" for c in ["id", *_host_columns()]})
    postgres.execute("DROP TABLE IF EXISTS people")
    postgres.execute(
        "CREATE TABLE people AS SELECT id::int8 AS id, x0, CASE WHEN ord % 7 = 0 THEN NULL "
        "ELSE x1 END AS x1, x2::numeric(12, 6) AS amount, x3 > 0 AS flag, "
        "CASE WHEN ord % 5 = 0 THEN NULL ELSE 'c' || (ord % 3) END AS city, "
        "date '2000-01-01' + ord::int AS born FROM people_src"
    )
    postgres.execute("ALTER TABLE people ADD PRIMARY KEY (id)")
    return postgres


def _host_columns() -> list[str]:
    return HOST.read_text().splitlines()[0].split(",")[1:]


@pytest.fixture(scope="module")
def shop_model(people: Postgres, tmp_path_factory) -> Iterator[tuple[LoadedModel, Path]]:
    """The shop's part of a split model trained on a snapshot of `people` (Parquet), and
    that snapshot."""
    root = tmp_path_factory.mktemp("lookup")
    snapshot = root / "people.parquet"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(ENV, people.password)
        write_parquet(sql_source(people, table="people"), "people", snapshot)
    spec = {
        "job": "lookup",
        "protocol": "split",
        "parties": [
            {"id": "bank", "role": "active", "data": {"dataset": "d"}},
            {"id": "shop", "role": "passive", "data": {"dataset": "d"}},
        ],
        "model": {"source": {"out_dim": 4}, "top": {"hidden": [8]}},
        "train": {"epochs": 1, "batch_size": 128, "checkpoint_every": 0},
        "validation": {"every": 1000},
    }
    datasets = {
        "bank": {"d": TableSource(path=str(FATE / "breast_hetero_guest.csv"), label="y")},
        "shop": {"d": TableSource(path=str(snapshot), format="parquet")},
    }
    states = {p: StateDir.create(root / p) for p in ("bank", "shop")}
    run_inprocess(parse_spec(spec), datasets, states=states)
    yield LoadedModel.open(states["shop"], "job", "shop"), snapshot


# --- the lookup --------------------------------------------------------------------


@pytest.mark.parametrize("id_type", ["int8", "text", "numeric"])
def test_a_lookup_gives_the_rows_of_the_ids_asked_typed_as_their_snapshot(
    pg: Postgres, people: Postgres, id_type: str, tmp_path: Path
) -> None:
    # Prepare: `people` with its id as `id_type`; a snapshot of it
    query = f"SELECT id::{id_type} AS id, x0, x1, amount, flag, city, born FROM people"
    source = sql_source(pg, query=query)
    write_parquet(source, "people", tmp_path / "snap.parquet")
    snapshot = pq.read_table(tmp_path / "snap.parquet")
    asked = [IDS[3], IDS[14], "no-such-id", IDS[40]]
    lookup = Lookup(source, "people")
    # Execute
    rows = lookup.rows(asked)
    # Assert: those rows only, with the snapshot's types and values
    got = rows.sort_by("id")
    held = pc.is_in(snapshot.column("id"), value_set=rows.column("id").combine_chunks())
    want = snapshot.filter(held).sort_by("id")
    assert got.num_rows == 3 and got.equals(want), (got, want)
    assert sorted(rows.column("id").to_pylist()) == sorted(asked[:2] + asked[3:])
    lookup.close()


def test_ids_are_bound_as_a_parameter_and_a_percent_sign_in_the_query_is_kept(
    pg: Postgres, people: Postgres
) -> None:
    # Prepare: a query with `%` in it, and ids that would be SQL if pasted in
    source = sql_source(pg, query="SELECT id::text AS id, city FROM people WHERE city LIKE 'c%'")
    lookup = Lookup(source, "people")
    hostile = ["1' OR '1'='1", "1); DROP TABLE people; --", "%s", "{}", '"']
    # Execute
    rows = lookup.rows([*hostile, IDS[1], IDS[2]])
    # Assert: nothing matched the hostile ids, the table is there, `%` matched as LIKE's
    held = set(rows.column("id").to_pylist())
    assert held <= {IDS[1], IDS[2]} and all(
        c.startswith("c") for c in rows.column("city").to_pylist()
    )
    assert lookup.rows(IDS[:5]).num_rows >= 1
    lookup.close()


def test_a_pool_keeps_its_connection_and_reconnects_when_the_database_is_back(
    pg: Postgres, people: Postgres
) -> None:
    # Prepare
    query = "SELECT id, pg_backend_pid() AS pid FROM people"
    lookup = Lookup(sql_source(pg, query=query), "people")
    first = lookup.rows([IDS[0]]).column("pid").to_pylist()
    assert lookup.rows([IDS[1]]).column("pid").to_pylist() == first  # the same connection
    # Execute: the database goes down
    pg.halt()
    try:
        with pytest.raises(DataError) as down:
            lookup.rows([IDS[0]])
    finally:
        assert pg.start() is None
    # Assert: a named error; once the server is back, the next lookup connects again
    assert "dataset 'people': the database at 127.0.0.1:" in str(down.value)
    assert "cannot be reached" in str(down.value)
    assert down.value.public == (
        "dataset 'people': the party's database cannot be reached; the party must start it "
        "or fix its config"
    )
    assert_no_secret(down.value, pg.password)
    again = lookup.rows([IDS[0]])
    assert again.num_rows == 1 and again.column("pid").to_pylist() != first
    lookup.close()
    assert not lookup.pool._idle


def test_a_connection_the_server_dropped_while_idle_is_replaced_at_once(
    pg: Postgres, people: Postgres
) -> None:
    # Prepare: a pooled connection, then a restart of the server while it is idle
    lookup = Lookup(sql_source(pg, table="people"), "people")
    assert lookup.rows([IDS[0]]).num_rows == 1
    pg.halt()
    assert pg.start() is None
    # Execute / Assert: the first lookup after the restart succeeds
    assert lookup.rows([IDS[0], IDS[1]]).num_rows == 2
    lookup.close()


def test_a_lookup_that_takes_too_long_is_cancelled_with_a_named_error(
    pg: Postgres, people: Postgres
) -> None:
    # Prepare: a query that sleeps a second a row, looked up with a 0.2 s timeout
    query = "SELECT id, x0, pg_sleep(1)::text AS slept FROM people"
    lookup = Lookup(sql_source(pg, query=query), "slow", timeout_s=0.2)
    # Execute
    with pytest.raises(DataError) as slow:
        lookup.rows([IDS[0]])
    # Assert
    assert "took longer than 0.2 s and was cancelled (statement_timeout)" in str(slow.value)
    assert "index the id column 'id'" in str(slow.value)
    assert slow.value.public == (
        "dataset 'slow': the party's database took longer than 0.2 s to look ids up; the "
        "party must speed its query up"
    )
    lookup.close()


def test_an_id_held_by_two_rows_is_a_named_error(pg: Postgres, people: Postgres) -> None:
    query = "SELECT id, x0 FROM people UNION ALL SELECT id, x0 FROM people"
    lookup = Lookup(sql_source(pg, query=query), "twice")
    with pytest.raises(DataError, match="returns more than one row for an id asked for"):
        lookup.rows([IDS[0]])
    lookup.close()


# --- the rows online scoring finds ---------------------------------------------------


def test_rows_looked_up_score_as_the_same_rows_of_their_snapshot(
    pg: Postgres, shop_model, tmp_path: Path
) -> None:
    # Prepare: the model's rows from the snapshot it was trained on, and from the database
    model, snapshot = shop_model
    from_file = TableRows.read(
        model, Dataset("d", TableSource(path=str(snapshot), format="parquet"))
    )
    from_sql = SqlRows.open(model, Dataset("people", sql_source(pg, table="people")))
    asked = [IDS[k] for k in (0, 5, 7, 14, 35, 104, 568)]  # NULLs at ord % 7, % 5
    # Execute
    found = from_sql.find(["nobody", *asked])
    # Assert: the same inputs and drift, row for row
    assert found is not None and sorted(found.ids) == sorted(asked)
    expected = from_file.find(list(found.ids))
    assert expected is not None and expected.ids == found.ids
    np.testing.assert_array_equal(found.inputs.x, expected.inputs.x)
    assert (found.inputs.cat is None) == (expected.inputs.cat is None)
    if found.inputs.cat is not None:
        assert found.inputs.cat.equal(expected.inputs.cat)
    np.testing.assert_array_equal(found.drift, expected.drift)
    assert from_sql.find(["nobody"]) is None
    assert from_sql.inputs.rows == 0 and from_sql.inputs.width == from_file.inputs.width
    from_sql.close()


def test_a_changed_row_and_a_new_person_are_found_at_the_next_lookup(
    pg: Postgres, shop_model
) -> None:
    # Prepare
    model, _ = shop_model
    pg.execute("DROP TABLE IF EXISTS people_live")
    pg.execute("CREATE TABLE people_live AS SELECT * FROM people")
    rows = SqlRows.open(model, Dataset("live", sql_source(pg, table="people_live")))
    before = rows.find([IDS[0], IDS[1]])
    assert before is not None
    # Execute: IDS[0] takes IDS[1]'s values; a new person with IDS[1]'s values
    pg.execute(
        "UPDATE people_live AS a SET x0 = b.x0, x1 = b.x1, amount = b.amount, flag = b.flag, "
        "city = b.city, born = b.born FROM people_live AS b WHERE a.id = %s AND b.id = %s",
        (int(IDS[0]), int(IDS[1])),
    )
    pg.execute(
        "INSERT INTO people_live SELECT 99999, x0, x1, amount, flag, city, born "
        "FROM people_live WHERE id = %s",
        (int(IDS[1]),),
    )
    after = rows.find([IDS[0], "99999"])
    # Assert
    assert after is not None
    like = before.take(np.array([before.ids.index(IDS[1])]))
    for i in (IDS[0], "99999"):
        row = after.take(np.array([after.ids.index(i)]))
        np.testing.assert_array_equal(row.inputs.x, like.inputs.x)
    rows.close()


def test_a_serving_table_whose_query_does_not_fit_the_model_is_skipped(
    pg: Postgres, shop_model, caplog
) -> None:
    model, _ = shop_model
    narrow = Dataset("narrow", sql_source(pg, query="SELECT id, x0 FROM people", serve=True))
    with caplog.at_level(logging.WARNING, logger="vfl.party.inference.rows"):
        source = serving_table(model, narrow)
    assert source.find([IDS[0]]) is None
    assert source.problem is not None and "lacks the model's column(s)" in source.problem.text
    assert source.problem.public.startswith("skipped, checked again every 60 s: ")
    assert "serving table 'narrow' is skipped (checked again in 60 s)" in caplog.text


def test_a_database_that_fails_during_scoring_names_the_party_and_the_dataset(
    pg: Postgres, shop_model
) -> None:
    # Prepare: the training table (from the snapshot) behind a serving table in PostgreSQL
    model, snapshot = shop_model
    datasets = {
        "live": sql_source(pg, table="people", serve=True),
        "d": TableSource(path=str(snapshot), format="parquet"),
    }
    rows = Rows.load(model, datasets)
    assert rows.find([IDS[0]]).ids == (IDS[0],)
    # Execute: the database goes down
    pg.halt()
    try:
        with pytest.raises(TableUnavailable) as down:
            rows.find([IDS[0]])
        problems = rows.problems()
    finally:
        assert pg.start() is None
    # Assert: named, the host only in the party's own form; served again once it is back
    assert down.value.public == (
        "party 'shop', online scoring: dataset 'live': the party's database cannot be "
        "reached; the party must start it or fix its config"
    )
    assert "127.0.0.1" in str(down.value) and "127.0.0.1" not in down.value.public
    assert_no_secret(down.value, pg.password)
    assert problems["live"].public.startswith("its lookups fail: dataset 'live'")
    assert rows.find([IDS[0]]).ids == (IDS[0],) and not rows.problems()
    rows.close()
