"""`vfl analyze` through real daemons: a coordinator and two party servers on loopback
gRPC in this process, the CLI in a subprocess. On the credit table split between a bank
(active) and a shop (passive), every column's IV from `vfl analyze --json` equals the IV
recomputed from the pooled table with the printed edges (1e-9); the wire audit shows
only keys, ciphertexts, PSI points and control, and none of the shop's edges; a column of
one value, a column of empty cells and a label that is not binary are named, not
crashes; `features.select` drops the columns below the bar, keeps the choice in each
party's model part and scores with it."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from vfl.contract.spec import TableSource
from vfl.coordinator.client import CoordinatorClient
from vfl.coordinator.server import create_coordinator_server
from vfl.party.analysis.sharing import AnalysisSharing
from vfl.party.config import PartyConfig
from vfl.party.daemon import DaemonOptions
from vfl.party.server import create_party_server
from vfl.party.state.model_store import ModelStore
from vfl.party.state.store import StateDir
from vfl.party.tables.preprocess.preprocessor import Preprocessor
from vfl.party.transport.audit import read_audit
from vfl.party.transport.audit_check import WOE_MESSAGES, find_plaintext, message_problems

from bench.credit_data import credit_tables
from tests.support.jobs import wait

pytestmark = pytest.mark.grpc

ROWS = 4000
CRYPTO = {"key_bits": 1024, "allow_insecure_test_keys": True}


def _bad_tables(root: Path) -> dict[str, dict[str, TableSource]]:
    """A bank table with a constant column, an empty one and a word column; one whose
    label has three values; a shop table of the same ids."""
    rng = np.random.default_rng(7)
    n = 300
    y = rng.integers(0, 2, n)
    lines = ["id,y,amount,constant,nothing,city"]
    for i in range(n):
        city = ["north", "south", "east"][i % 3] if i % 17 else ""
        lines.append(f"{i},{y[i]},{rng.normal() + y[i]:.6f},5,,{city}")
    (root / "odd.csv").write_text("\n".join(lines) + "\n")
    three = ["id,y,amount"] + [f"{i},{i % 3},{rng.normal():.6f}" for i in range(n)]
    (root / "three.csv").write_text("\n".join(three) + "\n")
    shop = ["id,spend"] + [f"{i},{rng.normal():.6f}" for i in range(n)]
    (root / "odd_shop.csv").write_text("\n".join(shop) + "\n")
    return {
        "bank": {
            "odd": TableSource(path=str(root / "odd.csv"), label="y"),
            "three": TableSource(path=str(root / "three.csv"), label="y"),
        },
        "shop": {
            "odd": TableSource(path=str(root / "odd_shop.csv")),
            "three": TableSource(path=str(root / "odd_shop.csv")),
        },
    }


class Federation:
    """A coordinator; bank (active) and shop (passive, reporting its bins but not its
    names), each with a state directory and the wire audit."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.tables = credit_tables(root, ROWS, seed=11)
        datasets = _bad_tables(root)
        for party in ("bank", "shop"):
            datasets[party]["credit"] = self.tables[party]
            datasets[party]["credit_test"] = self.tables[party]  # training rows: all
        self.coord = create_coordinator_server(str(root / "jobs.sqlite"), "127.0.0.1:0")
        self.address = f"127.0.0.1:{self.coord.port}"
        sharing = {"bank": AnalysisSharing(), "shop": AnalysisSharing(report_bins=True)}
        self.parties = {
            party: create_party_server(
                PartyConfig(
                    party,
                    "127.0.0.1:0",
                    self.address,
                    datasets=sets,
                    state_dir=root / party,
                    output_dir=root / f"{party}-scores",
                    analysis=sharing[party],
                ),
                options=DaemonOptions(audit_dir=str(root / "audit")),
            )
            for party, sets in datasets.items()
        }
        self.client = CoordinatorClient(self.address)

    def spec(self, dataset: str, **extra: object) -> Path:
        data = {"dataset": dataset}
        spec = {
            "job": f"analyze-{dataset}",
            "parties": [
                {"id": "bank", "role": "active", "data": data},
                {"id": "shop", "role": "passive", "data": data},
            ],
            "crypto": CRYPTO,
            **extra,
        }
        path = self.root / f"{dataset}-{len(extra)}.yaml"
        path.write_text(yaml.safe_dump(spec))
        return path

    def analyze(self, dataset: str, **extra: object) -> tuple[int, dict]:
        """`vfl analyze SPEC --coordinator ... --json`: exit code and printed object."""
        command = [
            sys.executable,
            "-m",
            "vfl.cli.main",
            "analyze",
            str(self.spec(dataset, **extra)),
        ]
        done = subprocess.run(
            [*command, "--coordinator", self.address, "--json"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        return done.returncode, json.loads(done.stdout) if done.stdout.strip() else {}

    def stop(self) -> None:
        self.client.close()
        for server in (*self.parties.values(), self.coord):
            server.stop(0)


@pytest.fixture(scope="module")
def fed(tmp_path_factory):
    federation = Federation(tmp_path_factory.mktemp("analyze"))
    code, federation.credit = federation.analyze("credit")
    assert code == 0, federation.credit
    yield federation
    federation.stop()


def pooled(fed: Federation) -> tuple[dict[str, dict[str, np.ndarray]], np.ndarray]:
    """Each party's columns by name, and the label, read back from the files, by id."""
    bank = np.genfromtxt(fed.tables["bank"].path, delimiter=",", names=True)
    shop = np.genfromtxt(fed.tables["shop"].path, delimiter=",", names=True)
    shop = shop[np.argsort(shop["id"])][np.searchsorted(np.sort(shop["id"]), bank["id"])]
    assert (shop["id"] == bank["id"]).all()
    columns = {
        "bank": {n: bank[n] for n in bank.dtype.names if n not in ("id", "y")},
        "shop": {n: shop[n] for n in shop.dtype.names if n != "id"},
    }
    return columns, bank["y"]


def recomputed_iv(values: np.ndarray, y: np.ndarray, edges: list[float]) -> tuple:
    """Counts per right-closed bin of `edges` and the IV as docs/usage.md defines it
    (+0.5 to both counts of a bin without events or non-events), written afresh here."""
    bins = np.searchsorted(np.asarray(edges), values, side="left")
    events = [int(((bins == b) & (y == 1)).sum()) for b in range(len(edges) + 1)]
    non_events = [int(((bins == b) & (y == 0)).sum()) for b in range(len(edges) + 1)]
    total_e, total_n = sum(events), sum(non_events)
    iv = 0.0
    for e, n in zip(events, non_events, strict=True):
        if e + n == 0:
            continue
        e, n = (e + 0.5, n + 0.5) if e == 0 or n == 0 else (e, n)
        iv += (e / total_e - n / total_n) * math.log((e / total_e) / (n / total_n))
    return events, non_events, iv


def test_every_columns_iv_equals_the_pooled_tables(fed) -> None:
    # Prepare
    result = fed.credit
    columns, y = pooled(fed)
    # Assert: 13 bank columns by name, 10 shop columns by opaque name, each with edges
    assert result["state"] == "SUCCEEDED" and result["rows"] == ROWS
    by_party = {p: [c for c in result["columns"] if c["party"] == p] for p in ("bank", "shop")}
    assert [c["column"] for c in by_party["bank"]] == list(columns["bank"])
    assert [c["column"] for c in by_party["shop"]] == [f"x{j}" for j in range(10)]
    for party, shown in by_party.items():
        names = list(columns[party])
        for j, column in enumerate(shown):
            values = columns[party][names[j]]
            events, non_events, iv = recomputed_iv(values, y, column["edges"])
            assert column["events"] == events and column["non_events"] == non_events
            assert column["iv"] == pytest.approx(iv, abs=1e-9), (party, names[j])
            assert len(column["edges"]) == 9 and not column["empty"]


def test_the_analysis_reads_as_the_table_was_made(fed) -> None:
    """The label is nonlinear in a sine of a bank projection, a bank x shop interaction
    of the first three columns of each, and a linear shop term: the shop's linear
    columns carry IV, the interaction's columns alone carry almost none."""
    iv = {(c["party"], c["column"]): c["iv"] for c in fed.credit["columns"]}
    interaction = [iv[("bank", f"a{j}")] for j in range(3)]
    assert max(interaction) < 0.05, interaction
    assert max(iv[("shop", f"x{j}")] for j in range(3, 10)) > 0.02


def test_only_keys_ciphertexts_psi_points_and_control_cross(fed) -> None:
    # Prepare
    records = [r for r in read_audit(fed.root / "audit") if r["job"] == fed.credit["job"]]
    shop_edges = [c["edges"] for c in fed.credit["columns"] if c["party"] == "shop"]
    # Assert: the tags, senders and kinds of the exchange, nothing else
    assert records and {r["sender"] for r in records} == {"bank", "shop"}
    assert message_problems(records, "bank", WOE_MESSAGES, "a WOE message") == []
    kinds = {r["kind"] for r in records}
    assert kinds <= {"public_key", "ciphertexts", "layer_setup", "control", "indices", "ec_points"}
    assert {"public_key", "ciphertexts", "ec_points", "control"} <= kinds
    # and none of the shop's edges, as float64, float32 or text, nor its feature values
    blobs = [r["data"] for r in records]
    edges = [float(e) for column in shop_edges for e in column]
    binary = [np.float64(e).tobytes() for e in edges]
    assert find_plaintext(blobs, binary) == set()
    texts = {f"{e:.6g}".encode() for e in edges if abs(e) > 1e-3}
    assert not [t for t in texts for b in blobs if t in b]
    columns, _ = pooled(fed)
    shop = np.column_stack(list(columns["shop"].values()))
    values = [v.tobytes() for v in shop[np.abs(shop) > 1e-3].astype("<f8")]
    assert find_plaintext(blobs, values) == set()


def test_one_value_empty_cells_and_words_are_named(fed) -> None:
    # Execute
    code, result = fed.analyze("odd", features={"bins": 5})
    # Assert
    assert code == 0, result
    bank = {c["column"]: c for c in result["columns"] if c["party"] == "bank"}
    assert bank["constant"]["note"] == "one distinct value" and bank["constant"]["iv"] == 0
    assert bank["nothing"]["note"] == "every cell is empty" and bank["nothing"]["iv"] == 0
    city = bank["city"]
    assert sorted(city["categories"]) == ["east", "north", "south"] and city["empty"]
    assert len(city["events"]) == 5  # three words, every other word, the empty cells
    assert city["events"][3] + city["non_events"][3] == 0  # no other word in these rows
    assert city["events"][4] + city["non_events"][4] == sum(1 for i in range(300) if i % 17 == 0)
    assert bank["amount"]["iv"] > 0.1


def test_a_label_that_is_not_binary_is_named(fed) -> None:
    code, result = fed.analyze("three")
    assert code == 2, result
    assert result["state"] == "FAILED"
    assert "binary" in result["reason"] and "3 distinct value" in result["reason"]


def test_select_drops_columns_below_the_bar_and_scores_with_the_choice(fed) -> None:
    # Prepare: the IVs the analysis printed, and the columns each party should keep
    iv = {(c["party"], c["column"]): c["iv"] for c in fed.credit["columns"]}
    shop_names = [f"b{j}" for j in range(10)]
    expected = {
        "bank": {c for (p, c), v in iv.items() if p == "bank" and v >= 0.02},
        "shop": {shop_names[int(c[1:])] for (p, c), v in iv.items() if p == "shop" and v >= 0.02},
    }
    data = {"dataset": "credit", "test_dataset": "credit_test"}  # all rows select, as analysed
    spec = {
        "job": "selected",
        "parties": [
            {"id": "bank", "role": "active", "data": data},
            {"id": "shop", "role": "passive", "data": data},
        ],
        "crypto": CRYPTO,
        "train": {"epochs": 1, "batch_size": 256},
        "features": {"select": {"iv_min": 0.02}},
    }
    # Execute
    job = fed.client.submit(yaml.safe_dump(spec))
    view = wait(fed.client, job, timeout=300)
    assert view.state == "SUCCEEDED", view.reason
    scored = wait(
        fed.client, fed.client.predict(f"model: {job}\ndata: {{bank: credit, shop: credit}}\n")
    )
    # Assert: each party's model part keeps its own columns at or above the bar
    assert scored.state == "SUCCEEDED", scored.reason
    for party in ("bank", "shop"):
        _, part = ModelStore(StateDir(fed.root / party)).load(job, party)
        pre = Preprocessor.model_validate_json(part["preprocess"])
        kept = {c.name for c in pre.columns if c.kind != "ignore"}
        assert kept == expected[party] and 0 < len(kept) < 13
        assert set(part["selection"]["kept"]) == kept
    assert scored.result.prediction.scored == ROWS


def test_monotone_bins_hold_the_same_equality(fed) -> None:
    # Execute: bins merged toward a monotone event rate (the shop's by the bank, on
    # counts; its edges cut at the coordinator)
    code, result = fed.analyze("credit", features={"binning": "monotone"})
    columns, y = pooled(fed)
    # Assert
    assert code == 0, result
    merged = 0
    for column in result["columns"]:
        names = list(columns[column["party"]])
        name = column["column"] if column["party"] == "bank" else names[int(column["column"][1:])]
        events, non_events, iv = recomputed_iv(columns[column["party"]][name], y, column["edges"])
        assert column["events"] == events and column["non_events"] == non_events
        assert column["iv"] == pytest.approx(iv, abs=1e-9)
        rate = [e / (e + n) for e, n in zip(events, non_events, strict=True)]
        assert rate == sorted(rate) or rate == sorted(rate, reverse=True), (name, rate)
        merged += len(column["edges"]) < 9
    assert merged >= 10  # most of the credit table's columns are not monotone in 10 bins
