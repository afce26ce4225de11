"""Online scoring that looks rows up in PostgreSQL by id, with real daemons in one process
and a real server (the `postgres` fixture; these tests skip where it cannot start).

The split and blindfl models are trained on the breast data without the rows
`APPLICANTS`, which only the serving tables hold: the bank's a file, the shop's (the
passive party) a PostgreSQL table. `vfl score` of them gives the scores `vfl predict`
gives over the serving tables; a model trained on both parties' rows in PostgreSQL scores
its rows by id as `vfl predict` over them; an UPDATE or an INSERT is scored at the next
request; a database that stops fails the requests that need it with an error naming the
party and the dataset while the daemon serves the rest, and scoring works again once it
is back; and the password is in nothing the run leaves."""

from __future__ import annotations

import csv
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from vfl.cli.main import main
from vfl.contract.spec import TableSource
from vfl.coordinator.client import CoordinatorClient
from vfl.coordinator.server import create_coordinator_server
from vfl.party.config import PartyConfig
from vfl.party.daemon import DaemonOptions
from vfl.party.server import create_party_server

from tests.e2e.test_serving_tables import APPLICANTS, DONOR, TOLERANCE, Table
from tests.support.jobs import wait
from tests.support.postgres import Postgres

pytestmark = pytest.mark.grpc

ENV = "VFL_E2E_SERVE_PGPASS"
NEW = "900001"  # in the bank's serving file from the start; in the shop's table later
CHANGED = APPLICANTS[1]  # the shop's row of it becomes DONOR's

TRAIN = """
job: {name}
protocol: {protocol}
crypto: {{key_bits: 512, allow_insecure_test_keys: true}}
parties:
  - {{id: bank, role: active, data: {{dataset: {bank}}}}}
  - {{id: shop, role: passive, data: {{dataset: {shop}}}}}
model: {{source: {{out_dim: 4}}, top: {{hidden: [8]}}}}
train: {{epochs: 1, batch_size: 128, checkpoint_every: 0}}
validation: {{every: 1000}}
"""


def load(pg: Postgres, table: str, csv: Path, id_type: str) -> None:
    """`csv` (id, features, maybe y) as PostgreSQL table `table`, keyed by its id."""
    header = csv.read_text().split("\n", 1)[0].split(",")
    types = {c: id_type if c == "id" else "int4" if c == "y" else "float8" for c in header}
    pg.load_csv(table, csv, types)
    pg.execute(f'ALTER TABLE "{table}" DROP COLUMN ord, ADD PRIMARY KEY (id)')


class Federation:
    """A coordinator, the bank (active) and the shop (passive), in this process. Datasets:
    `breast` (files without `APPLICANTS`), `live` (serving: the bank's a file, the shop's
    the PostgreSQL table `serve_shop_live`), `pg` (each party's whole breast table in
    PostgreSQL) and, at the shop, `narrow` (a file of 9 columns, which `live` does not
    fit)."""

    def __init__(self, root: Path, pg: Postgres) -> None:
        self.root, self.pg = root, pg
        self.coord = create_coordinator_server(str(root / "jobs.sqlite"), "127.0.0.1:0")
        self.address = f"127.0.0.1:{self.coord.port}"
        bank, shop = Table("breast_hetero_guest.csv"), Table("breast_hetero_host.csv")
        self.shop_table = shop
        sql = {"format": "sql", "url": pg.url, "password_env": ENV}
        load(pg, "serve_bank_rows", bank.training(root / "bank-all.csv"), "text")
        load(pg, "serve_shop_rows", shop.training(root / "shop-all.csv"), "text")
        self.set_shop_live({i: i for i in APPLICANTS})
        bank_sets = {
            "breast": TableSource(path=str(bank.training(root / "bank.csv")), label="y"),
            "live": self._file(bank.serving(root / "bank-live.csv", self.bank_live())),
            "pg": TableSource.model_validate({**sql, "table": "serve_bank_rows", "label": "y"}),
        }
        shop_sets = {
            "breast": TableSource(path=str(shop.training(root / "shop.csv"))),
            "live": TableSource.model_validate({**sql, "table": "serve_shop_live", "serve": True}),
            "pg": TableSource.model_validate(
                {**sql, "query": "SELECT * FROM serve_shop_rows WHERE id LIKE '%'"}
            ),
            "narrow": TableSource(path=str(self._narrow(shop, root / "narrow.csv"))),
        }
        self.bank, self.shop = self._start("bank", bank_sets), self._start("shop", shop_sets)
        self.client = CoordinatorClient(self.address)

    @staticmethod
    def bank_live() -> dict[str, str]:
        return {**{i: i for i in APPLICANTS}, NEW: DONOR}

    def set_shop_live(self, rows: dict[str, str]) -> None:
        """The shop's serving table in PostgreSQL: each id of `rows` with the features of
        the row it names."""
        load(self.pg, "serve_shop_live", self.shop_table.serving(self.root / "x.csv", rows), "int8")

    @staticmethod
    def _file(path: Path) -> TableSource:
        return TableSource(path=str(path), serve=True)

    @staticmethod
    def _narrow(shop: Table, path: Path) -> Path:
        lines = [[*row[:10]] for row in [shop.header, *shop.rows.values()]]
        path.write_text("\n".join(",".join(line) for line in lines) + "\n")
        return path

    def _start(self, party: str, datasets: dict[str, TableSource]):
        config = PartyConfig(
            party,
            "127.0.0.1:0",
            self.address,
            datasets=datasets,
            state_dir=self.root / party,
            output_dir=self.root / f"{party}-scores",
        )
        return create_party_server(config, options=DaemonOptions(scoring_timeout_s=5.0))

    def train(self, name: str, protocol: str, bank: str, shop: str) -> str:
        spec = TRAIN.format(name=name, protocol=protocol, bank=bank, shop=shop)
        view = wait(self.client, self.client.submit(spec))
        assert view.state == "SUCCEEDED", view.reason
        return view.job_id

    def stop(self) -> None:
        self.client.close()
        for server in (self.bank, self.shop, self.coord):
            server.stop(0)


@pytest.fixture(scope="module")
def fed(postgres: Postgres, tmp_path_factory) -> Iterator[Federation]:
    """The federation and its models; every log record of the daemons in `daemons.log`."""
    root = tmp_path_factory.mktemp("sqlserve")
    handler = logging.FileHandler(root / "daemons.log")
    vfl_log = logging.getLogger("vfl")
    level = vfl_log.level
    vfl_log.setLevel(logging.INFO)
    vfl_log.addHandler(handler)
    with pytest.MonkeyPatch.context() as env:
        env.setenv(ENV, postgres.password)
        federation = Federation(root, postgres)
        try:
            federation.models = {
                "split": federation.train("split", "split", "breast", "breast"),
                "blindfl": federation.train("blindfl", "blindfl", "breast", "breast"),
                "pg": federation.train("pg", "split", "pg", "pg"),
                "narrow": federation.train("narrow", "split", "breast", "narrow"),
            }
            federation.printed = []  # what the CLI printed
            yield federation
        finally:
            federation.stop()
            vfl_log.removeHandler(handler)
            vfl_log.setLevel(level)


def vfl_predict(fed: Federation, model: str, dataset: str, out: str, capsys) -> dict[str, float]:
    """Every row's score from `vfl predict` of `model` over `dataset` at both parties."""
    data = ["--data", f"bank={dataset}", "--data", f"shop={dataset}"]
    assert main(["predict", model, *data, "--out", out, "--coordinator", fed.address]) == 0
    capsys.readouterr()
    with (fed.root / "bank-scores" / f"{out}.csv").open() as fh:
        return {row["id"]: float(row["score"]) for row in csv.DictReader(fh)}


def vfl_score(fed: Federation, model: str, ids, capsys) -> tuple[int, dict[str, dict], str]:
    """`vfl score --json` of `ids`: its exit code, each id's result, what it printed."""
    flags = [a for i in ids for a in ("--id", i)]
    code = main(["score", model, *flags, "--coordinator", fed.address, "--json"])
    out = capsys.readouterr()
    fed.printed += [out.out, out.err]
    results = {r["id"]: r for r in json.loads(out.out)["results"]} if code in (0, 1) else {}
    return code, results, out.err


def scores(fed: Federation, model: str, ids, capsys) -> dict[str, float]:
    code, results, err = vfl_score(fed, model, ids, capsys)
    assert code == 0, (err, results)
    return {i: r["score"] for i, r in results.items()}


@pytest.mark.parametrize("protocol", ["split", "blindfl"])
def test_ids_only_in_a_postgresql_serving_table_score_as_vfl_predict_over_it(
    fed, protocol, capsys
) -> None:
    # Prepare: `vfl predict` over the serving tables (the shop's: a snapshot of its table)
    model = fed.models[protocol]
    batch = vfl_predict(fed, model, "live", f"{protocol}-live", capsys)
    assert set(batch) == set(APPLICANTS)
    # Execute
    online = scores(fed, model, APPLICANTS, capsys)
    # Assert
    for i in APPLICANTS:
        assert abs(online[i] - batch[i]) <= TOLERANCE[protocol], (i, online[i], batch[i])


def test_a_model_trained_on_postgresql_scores_its_rows_by_id_as_vfl_predict(fed, capsys) -> None:
    # Prepare: each party's training table is its PostgreSQL dataset `pg`
    model = fed.models["pg"]
    batch = vfl_predict(fed, model, "pg", "pg", capsys)
    ids = ["62", "186", "320", "133", "273"]
    # Execute
    online = scores(fed, model, ids, capsys)
    # Assert
    for i in ids:
        assert abs(online[i] - batch[i]) <= TOLERANCE["split"], (i, online[i], batch[i])


def test_an_update_is_scored_at_the_next_request_and_an_insert_found_at_once(fed, capsys) -> None:
    # Prepare
    model = fed.models["split"]
    before = scores(fed, model, [CHANGED, DONOR], capsys)
    code, results, _ = vfl_score(fed, model, [NEW], capsys)
    assert code == 1 and results[NEW]["error"] == "not_at_peer"
    # Execute: the shop's row of CHANGED becomes DONOR's; NEW arrives with DONOR's row
    x = ", ".join(f"x{k}" for k in range(20))
    fed.pg.execute(
        f"UPDATE serve_shop_live AS a SET ({x}) = (SELECT {x} FROM serve_shop_rows AS b "
        "WHERE b.id = %s) WHERE a.id = %s",
        (DONOR, int(CHANGED)),
    )
    fed.pg.execute(
        f"INSERT INTO serve_shop_live SELECT %s, {x} FROM serve_shop_rows WHERE id = %s",
        (int(NEW), DONOR),
    )
    after = scores(fed, model, [CHANGED, NEW], capsys)
    # Assert: CHANGED as `vfl predict` scores the new rows; NEW as DONOR
    batch = vfl_predict(fed, model, "live", "changed", capsys)
    assert abs(after[CHANGED] - before[CHANGED]) > 1e-4
    assert abs(after[CHANGED] - batch[CHANGED]) <= TOLERANCE["split"]
    assert abs(after[NEW] - before[DONOR]) <= TOLERANCE["split"]


def test_a_database_that_stops_fails_its_requests_by_name_and_serves_again_once_back(
    fed, capsys
) -> None:
    # Prepare: both models served (the narrow one's tables hold no PostgreSQL table)
    model, narrow = fed.models["split"], fed.models["narrow"]
    before = scores(fed, model, [APPLICANTS[0]], capsys)
    narrow_before = scores(fed, narrow, [DONOR], capsys)
    served = fed.bank.daemon.online.served(model)
    session = served.session
    # Execute: the database stops
    fed.pg.halt()
    try:
        code, _, err = vfl_score(fed, model, [APPLICANTS[0]], capsys)
        narrow_during = scores(fed, narrow, [DONOR], capsys)
        assert main(["models", "show", model, "--coordinator", fed.address]) == 0
        shown = capsys.readouterr().out
        fed.printed.append(shown)
    finally:
        assert fed.pg.start() is None
    after = scores(fed, model, [APPLICANTS[0]], capsys)
    # Assert: a named error for the request (exit 3: retry), no host; the daemon served
    # the other model meanwhile, and scores the same once the database is back
    assert code == 3
    assert err.strip() == (
        "error: party 'shop', online scoring: dataset 'live': the party's database cannot "
        "be reached; the party must start it or fix its config"
    )
    assert f":{fed.pg.port}" not in err
    assert narrow_during == narrow_before
    assert served.session is session  # the shop said why, in step: the session went on
    assert "online scoring, table 'live': its lookups fail: dataset 'live': the party's " in shown
    assert after == pytest.approx(before, abs=1e-9)
    log = (fed.root / "daemons.log").read_text()
    assert f"dataset 'live': the database at 127.0.0.1:{fed.pg.port} cannot be reached" in log


def test_no_password_in_any_output_log_or_file(fed) -> None:
    files = [p for p in fed.root.rglob("*") if p.is_file()]
    assert any(p.name == "daemons.log" for p in files) and fed.printed
    assert fed.pg.password not in "\n".join(fed.printed)
    for path in files:
        assert fed.pg.password.encode() not in path.read_bytes(), path
