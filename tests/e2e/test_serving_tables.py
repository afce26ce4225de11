"""Serving tables against real daemons in one process: a split and a blindfl model trained
on the breast data without the rows `APPLICANTS`, which only the parties' serving tables
(`serve: true`) hold. `vfl score` finds them and gives the score `vfl predict` gives over
the serving tables; a serving table's row wins over the training table's; a changed
serving row is scored with its new values; a serving table that does not fit the model
is skipped with a warning while the others serve."""

from __future__ import annotations

import csv
import json
import logging
import os
from pathlib import Path

import pytest
from vfl.cli.main import main
from vfl.contract.spec import TableSource
from vfl.coordinator.client import CoordinatorClient
from vfl.coordinator.server import create_coordinator_server
from vfl.party.config import PartyConfig
from vfl.party.daemon import DaemonOptions
from vfl.party.server import create_party_server

from tests.support.data import FATE
from tests.support.jobs import wait

pytestmark = pytest.mark.grpc

APPLICANTS = ("392", "18", "405", "444", "125")  # in no training table, in every serving one
SHADOWED, DONOR = "186", "62"  # both in the training tables; serving: SHADOWED with DONOR's row

TRAIN = """
job: {protocol}
protocol: {protocol}
crypto: {{key_bits: 512, allow_insecure_test_keys: true}}
parties:
  - {{id: bank, role: active, data: {{dataset: breast}}}}
  - {{id: shop, role: passive, data: {{dataset: breast}}}}
model: {{source: {{out_dim: 4}}, top: {{hidden: [8]}}}}
train: {{epochs: 1, batch_size: 128, checkpoint_every: 0}}
validation: {{every: 1000}}
"""


class Table:
    """A party's breast table: its header and rows by id, without the label column."""

    def __init__(self, name: str) -> None:
        lines = [line.split(",") for line in (FATE / name).read_text().splitlines()]
        self.label = lines[0].index("y") if "y" in lines[0] else None
        self.header, self.rows = lines[0], {r[0]: r for r in lines[1:]}

    def features(self, row: list[str]) -> list[str]:
        return [c for k, c in enumerate(row[1:], 1) if k != self.label]

    def training(self, path: Path) -> Path:
        """The table without `APPLICANTS`, label kept."""
        kept = [r for i, r in self.rows.items() if i not in APPLICANTS]
        path.write_text("\n".join(",".join(r) for r in [self.header, *kept]) + "\n")
        return path

    def serving(self, path: Path, rows: dict[str, str], columns: int | None = None) -> Path:
        """A serving table (no label): each id of `rows` with the features of the row it
        names (the first `columns` of them), written whole, then renamed into place."""
        header = self.features(self.header)[:columns]
        lines = [["id", *header]]
        lines += [[i, *self.features(self.rows[like])[:columns]] for i, like in rows.items()]
        part = path.with_suffix(".part")
        part.write_text("\n".join(",".join(line) for line in lines) + "\n")
        os.replace(part, path)
        return path


LIVE = {**{i: i for i in APPLICANTS}, SHADOWED: DONOR}  # what the serving tables hold


class Federation:
    """A coordinator, the bank (active) and the shop (passive). The bank's config lists a
    serving table that does not fit the model (`bad`, without a column) before `live`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.coord = create_coordinator_server(str(root / "jobs.sqlite"), "127.0.0.1:0")
        self.address = f"127.0.0.1:{self.coord.port}"
        self.tables = {
            "bank": Table("breast_hetero_guest.csv"),
            "shop": Table("breast_hetero_host.csv"),
        }
        self.live = {p: root / f"{p}-live.csv" for p in self.tables}
        bank, shop = self.tables["bank"], self.tables["shop"]
        bank_sets = {
            "breast": TableSource(path=str(bank.training(root / "bank.csv")), label="y"),
            "bad": self._serve(bank.serving(root / "bad.csv", LIVE, columns=9)),
            "live": self._serve(bank.serving(self.live["bank"], LIVE)),
        }
        shop_sets = {
            "breast": TableSource(path=str(shop.training(root / "shop.csv"))),
            "live": self._serve(shop.serving(self.live["shop"], LIVE)),
        }
        self.bank = self._start("bank", bank_sets)
        self.shop = self._start("shop", shop_sets)
        self.client = CoordinatorClient(self.address)

    @staticmethod
    def _serve(path: Path) -> TableSource:
        return TableSource(path=str(path), serve=True)

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

    def train(self, protocol: str) -> str:
        view = wait(self.client, self.client.submit(TRAIN.format(protocol=protocol)))
        assert view.state == "SUCCEEDED", view.reason
        return view.job_id

    def stop(self) -> None:
        self.client.close()
        for server in (self.bank, self.shop, self.coord):
            server.stop(0)


@pytest.fixture(scope="module")
def fed(tmp_path_factory):
    federation = Federation(tmp_path_factory.mktemp("serving"))
    federation.models = {p: federation.train(p) for p in ("split", "blindfl")}
    yield federation
    federation.stop()


def vfl_predict(fed: Federation, model: str, dataset: str, capsys) -> dict[str, float]:
    """Every row's score from `vfl predict` of `model` over `dataset` at both parties."""
    data = ["--data", f"bank={dataset}", "--data", f"shop={dataset}"]
    out = f"{model}-{dataset}"
    assert main(["predict", model, *data, "--out", out, "--coordinator", fed.address]) == 0
    capsys.readouterr()
    with (fed.root / "bank-scores" / f"{out}.csv").open() as fh:
        return {row["id"]: float(row["score"]) for row in csv.DictReader(fh)}


def vfl_score(fed: Federation, model: str, ids, capsys) -> dict[str, dict]:
    """`vfl score --json` of `ids`: each id's result."""
    flags = [a for i in ids for a in ("--id", i)]
    main(["score", model, *flags, "--coordinator", fed.address, "--json"])
    return {r["id"]: r for r in json.loads(capsys.readouterr().out)["results"]}


TOLERANCE = {"split": 1e-6, "blindfl": 1e-4}  # blindfl: fixed-point encodings, as batch


@pytest.mark.parametrize("protocol", ["split", "blindfl"])
def test_ids_only_in_serving_tables_score_as_vfl_predict_over_them(fed, protocol, capsys) -> None:
    # Prepare
    model = fed.models[protocol]
    batch = vfl_predict(fed, model, "live", capsys)
    assert set(batch) == set(LIVE)
    # Execute
    online = vfl_score(fed, model, [*APPLICANTS, SHADOWED, DONOR], capsys)
    # Assert: the applicants and SHADOWED as in the serving tables
    for i in LIVE:
        assert "error" not in online[i], online[i]
        assert abs(online[i]["score"] - batch[i]) <= TOLERANCE[protocol], i
    # a serving table's row wins over the training table's: SHADOWED scores as DONOR
    assert abs(online[SHADOWED]["score"] - online[DONOR]["score"]) <= TOLERANCE[protocol]


def test_a_serving_table_that_does_not_fit_is_skipped_with_a_warning(fed, caplog, capsys) -> None:
    # Prepare: the model loaded anew at the bank
    model = fed.models["split"]
    fed.bank.daemon.online.unload(model)
    # Execute
    with caplog.at_level(logging.WARNING, logger="vfl.party.inference.rows"):
        online = vfl_score(fed, model, [APPLICANTS[0], DONOR], capsys)
    # Assert: `bad` comes first but is skipped; `live` and the training table serve
    assert "serving table 'bad' is skipped until its file changes" in caplog.text
    assert all("error" not in r for r in online.values()), online
    served = fed.bank.daemon.online.served(model)
    assert served is not None and list(served.rows.problems()) == ["bad"]
    # `vfl models show` says so, without the column's name
    assert main(["models", "show", model, "--coordinator", fed.address]) == 0
    shown = capsys.readouterr().out
    assert "online scoring, table 'bad': skipped until its file changes: " in shown
    assert "its columns differ from the training columns" in shown and "x9" not in shown


def test_a_changed_serving_row_is_scored_with_its_new_values(fed, capsys) -> None:
    # Prepare
    model, changed = fed.models["split"], APPLICANTS[1]
    before = vfl_score(fed, model, [changed, DONOR], capsys)
    assert abs(before[changed]["score"] - before[DONOR]["score"]) > 1e-3
    # Execute: both parties give `changed` DONOR's row and add a new person; only the
    # bank adds another one
    rows = {**LIVE, changed: DONOR, "new": APPLICANTS[2]}
    fed.tables["shop"].serving(fed.live["shop"], rows)
    fed.tables["bank"].serving(fed.live["bank"], {**rows, "only-bank": DONOR})
    after = vfl_score(fed, model, [changed, "new", "only-bank"], capsys)
    # Assert
    assert abs(after[changed]["score"] - before[DONOR]["score"]) <= TOLERANCE["split"]
    first = vfl_score(fed, model, [APPLICANTS[2]], capsys)[APPLICANTS[2]]
    assert abs(after["new"]["score"] - first["score"]) <= TOLERANCE["split"]
    assert after["only-bank"]["error"] == "not_at_peer"
    assert after["only-bank"]["message"] == "party 'shop' holds no row with id 'only-bank'"
