"""Serving tables (protocol tier, no transport): where a party looks ids up to score online
with a split model trained on the breast data. Serving tables win over the training table,
in the config's order; a table that does not fit the model is skipped until its file
changes; a changed file is read again, Parquet folders too; `serve` is a party config
field only."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from vfl.contract.errors import SpecError
from vfl.contract.spec import TableSource, parse_spec
from vfl.party.config import parse_party_config
from vfl.party.inference.model import LoadedModel
from vfl.party.inference.rows import Found, Rows
from vfl.party.state import StateDir
from vfl.party.tables.load import read_raw

from tests.support.data import FATE, breast
from tests.support.harness import run_inprocess

SPEC = {
    "job": "serving",
    "protocol": "split",
    "parties": [
        {"id": "bank", "role": "active", "data": {"dataset": "d"}},
        {"id": "shop", "role": "passive", "data": {"dataset": "d"}},
    ],
    "model": {"source": {"out_dim": 4}, "top": {"hidden": [8]}},
    "train": {"epochs": 1, "batch_size": 128, "checkpoint_every": 0},
    "validation": {"every": 1000},
}


@pytest.fixture(scope="module")
def bank_model(tmp_path_factory) -> LoadedModel:
    """The bank's part of a split model trained on the breast tables."""
    root = tmp_path_factory.mktemp("serving")
    states = {p: StateDir.create(root / p) for p in ("bank", "shop")}
    run_inprocess(parse_spec(SPEC), breast(), states=states)
    return LoadedModel.open(states["bank"], "job", "bank")


GUEST = {
    line.split(",")[0]: line.split(",")[2:]  # the features, without the label
    for line in (FATE / "breast_hetero_guest.csv").read_text().splitlines()
}


def serving_csv(path: Path, rows: dict[str, str], columns: int = 10) -> TableSource:
    """A serving table of the bank: each id with the features of a row of its training
    table (the first `columns` of them), written whole and renamed into place."""
    header = ",".join(["id", *GUEST["id"][:columns]])
    lines = [header, *(",".join([i, *GUEST[like][:columns]]) for i, like in rows.items())]
    part = path.with_suffix(".part")
    part.write_text("\n".join(lines) + "\n")
    os.replace(part, path)
    return TableSource(path=str(path), serve=True)


def training() -> TableSource:
    return TableSource(path=str(FATE / "breast_hetero_guest.csv"), label="y")


def assert_rows_like(rows: Rows, ids: list[str], likes: list[str]) -> None:
    """The rows `rows` finds for `ids` are the training rows `likes`, in order."""
    found = rows.find(ids)
    assert found.ids == tuple(ids)
    index = rows.training.index
    expected = rows.training.inputs.x[[index[like] for like in likes]]
    np.testing.assert_array_equal(found.inputs.x, expected)


def test_serving_tables_win_over_the_training_table_in_the_configs_order(
    bank_model, tmp_path: Path
) -> None:
    # Prepare: the training table listed between two serving tables
    datasets = {
        "live1": serving_csv(tmp_path / "live1.csv", {"133": "273", "new1": "18"}),
        "d": training(),
        "live2": serving_csv(tmp_path / "live2.csv", {"133": "392", "new1": "405", "new2": "444"}),
    }
    # Execute
    rows = Rows.load(bank_model, datasets)
    # Assert: live1, then live2, then the training table, whatever the config's order
    assert [s.name for s in rows.serving] == ["live1", "live2"] and rows.training.name == "d"
    assert_rows_like(rows, ["new2", "133", "new1", "18"], ["444", "273", "18", "18"])
    assert rows.find(["nobody"]).ids == () and rows.find(["nobody"]).inputs.width == 10
    inputs, lacks = rows.find(["nobody", "new2"]).padded(["nobody", "new2"])
    assert list(lacks) == [0] and not inputs.x[0].any()


def test_a_serving_table_that_does_not_fit_is_skipped_until_its_file_changes(
    bank_model, tmp_path: Path, caplog
) -> None:
    # Prepare: a serving table without the last column, listed first
    bad = tmp_path / "bad.csv"
    datasets = {
        "bad": serving_csv(bad, {"new1": "18"}, columns=9),
        "live": serving_csv(tmp_path / "live.csv", {"new2": "444"}),
        "d": training(),
    }
    # Execute
    with caplog.at_level(logging.WARNING, logger="vfl.party.inference.rows"):
        rows = Rows.load(bank_model, datasets)
    # Assert: skipped with a warning, the other tables serve
    assert "serving table 'bad' is skipped until its file changes" in caplog.text
    assert "lacks the model's column(s) 'x9'" in caplog.text
    problem = rows.problems()["bad"]
    assert problem.public.startswith("skipped until its file changes: ")
    assert "x9" in problem.text and "x9" not in problem.public
    assert rows.find(["new1", "new2", "18"]).ids == ("new2", "18")
    assert rows.refreshed(bank_model) is rows
    # Execute / Assert: the table fixed, it serves
    serving_csv(bad, {"new1": "18"})
    fixed = rows.refreshed(bank_model)
    assert_rows_like(fixed, ["new1", "new2"], ["18", "444"])
    assert not fixed.problems()


def test_a_changed_serving_row_is_read_with_its_new_values_and_counts_drift(
    bank_model, tmp_path: Path
) -> None:
    # Prepare
    live = tmp_path / "live.csv"
    datasets = {"live": serving_csv(live, {"new1": "18"}), "d": training()}
    rows = Rows.load(bank_model, datasets)
    assert not any(rows.find(["new1"]).drift_counts().values())
    # Execute: new1 changes, with a value far beyond the training rows
    serving_csv(live, {"new1": "392"})
    text = live.read_text().replace(",".join(GUEST["392"]), ",".join(["1e6", *GUEST["392"][1:]]))
    live.write_text(text)
    fresh = rows.refreshed(bank_model)
    # Assert
    assert_rows_like(fresh, ["18"], ["18"])
    found = fresh.find(["new1"])
    assert found.drift_counts()["out_of_range"] == 1
    expected = rows.training.inputs.x[rows.training.index["392"]]
    np.testing.assert_array_equal(found.inputs.x[0, 1:], expected[1:])
    # a change that does not load (an id twice) keeps the rows read before
    live.write_text(text + text.splitlines()[1] + "\n")
    kept = fresh.refreshed(bank_model)
    assert kept.serving[0].find(["new1"]) is not None
    assert "1 duplicate id" in str(kept.problems()["live"])


def test_a_parquet_folder_is_read_again_when_a_file_is_added(bank_model, tmp_path: Path) -> None:
    # Prepare
    folder = tmp_path / "live"
    folder.mkdir()

    def part(name: str, rows: dict[str, str]) -> None:
        columns = {"id": list(rows)}
        for c, column in enumerate(GUEST["id"]):
            columns[column] = [float(GUEST[like][c]) for like in rows.values()]
        pq.write_table(pa.table(columns), folder / name)

    part("0.parquet", {"new1": "18"})
    source = TableSource(path=str(folder), format="parquet", serve=True)
    rows = Rows.load(bank_model, {"live": source, "d": training()})
    assert rows.find(["new2"]).ids == ()
    # Execute
    part("1.parquet", {"new2": "444"})
    fresh = rows.refreshed(bank_model)
    # Assert
    assert_rows_like(fresh, ["new1", "new2"], ["18", "444"])


def test_serve_is_a_party_config_field_only() -> None:
    raw = {"party": "bank", "datasets": {"live": {"path": "live.csv", "serve": True}}}
    config = parse_party_config(raw, Path("/x"))
    assert config.datasets["live"].serve and config.datasets["live"].path == "/x/live.csv"
    parties = [{**SPEC["parties"][0], "data": {"dataset": "d", "serve": True}}]
    with pytest.raises(SpecError, match="serve"):
        parse_spec({**SPEC, "parties": [*parties, SPEC["parties"][1]]})


HOST = {
    line.split(",")[0]: line.split(",")[1:]
    for line in (FATE / "breast_hetero_host.csv").read_text().splitlines()[1:]
}


def libsvm(path: Path, rows: dict[str, str]) -> TableSource:
    """The shop's rows as LIBSVM (`@id index:value`, zeros left out): each id of `rows`
    with the features of the host row it names."""
    lines = []
    for i, like in rows.items():
        cells = [f"{c}:{v}" for c, v in enumerate(HOST[like]) if float(v) != 0.0]
        lines.append(" ".join([f"@{i}", *cells]))
    path.write_text("\n".join(lines) + "\n")
    return TableSource(path=str(path), format="libsvm")


def test_libsvm_serving_tables_stay_sparse_and_win(tmp_path: Path) -> None:
    # Prepare: the shop's part of a model trained on its rows as LIBSVM
    train = libsvm(tmp_path / "shop.svm", {i: i for i in HOST})
    sets = {**breast(), "shop": {"d": train}}
    states = {p: StateDir.create(tmp_path / p) for p in ("bank", "shop")}
    run_inprocess(parse_spec(SPEC), sets, states=states)
    model = LoadedModel.open(states["shop"], "job", "shop")
    live = libsvm(tmp_path / "live.svm", {"133": "273", "new1": "18"})
    # Execute
    rows = Rows.load(model, {"live": live.model_copy(update={"serve": True}), "d": train})
    found = rows.find(["18", "new1", "133", "392"])
    # Assert: sparse rows of both tables, the serving table's first
    assert found.inputs.sparse and found.ids == ("18", "new1", "133", "392")
    index = rows.training.index
    expected = rows.training.inputs.x[[index[i] for i in ("18", "18", "273", "392")]]
    assert (found.inputs.x != expected).nnz == 0


class QueriedRows:
    """A `RowSource` that fetches the raw rows of the ids it is asked for, as a database
    queried by id would (here from the lines of a CSV file)."""

    def __init__(self, model: LoadedModel, path: Path, folder: Path) -> None:
        self.model, self.folder, self.name, self.problem = model, folder, "queried", None
        self.lines = {line.split(",")[0]: line for line in path.read_text().splitlines()}
        self.queries: list[list[str]] = []

    def find(self, ids):
        self.queries.append(list(ids))
        held = [self.lines[i] for i in ids if i in self.lines]
        if not held:
            return None
        result = self.folder / f"query{len(self.queries)}.csv"
        result.write_text("\n".join([self.lines["id"], *held]) + "\n")
        pre = self.model.preprocessor
        raw = read_raw(TableSource(path=str(result)), self.name, pre.mode, pre.kinds())
        return Found.of(*self.model.prepare(raw))

    def refreshed(self, model: LoadedModel) -> QueriedRows:
        return self


def test_a_source_queried_by_id_plugs_in(bank_model, tmp_path: Path) -> None:
    # Prepare: a queried source before the training table
    live = tmp_path / "live.csv"
    serving_csv(live, {"133": "273", "new1": "18"})
    rows = Rows.load(bank_model, {"d": training()})
    queried = QueriedRows(bank_model, live, tmp_path)
    rows = Rows((queried,), rows.training)
    # Execute / Assert: it is asked only for the ids, and its rows win
    assert_rows_like(rows, ["392", "new1", "133"], ["392", "18", "273"])
    assert queried.queries == [["392", "new1", "133"]]
