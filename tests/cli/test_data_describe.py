"""`vfl data describe`: a party's own summary of a dataset, in process through `main`."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
from vfl.cli.main import main

ROWS = "id,y,age,city,income\n007,1,30,paris,1.5\n008,0,,lyon,2.5\n009,1,50,,\n010,0,40,paris,4\n"


def _config(tmp_path, dataset: str = "{path: d.csv, label: y}") -> str:
    (tmp_path / "d.csv").write_text(ROWS)
    (tmp_path / "party.yaml").write_text(f"party: bank\ndatasets:\n  loans: {dataset}\n")
    return str(tmp_path / "party.yaml")


def test_describe_prints_type_missing_distinct_and_range(tmp_path, capsys) -> None:
    assert main(["data", "describe", "--config", _config(tmp_path), "loans"]) == 0
    lines = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[2:]}
    assert lines["id"] == ["id", "id", "0.0%", "4"]
    assert lines["y"] == ["y", "label", "0.0%", "2", "0", "/", "0.5", "/", "1"]
    assert lines["age"] == ["age", "numeric", "25.0%", "3", "30", "/", "40", "/", "50"]
    assert lines["city"] == ["city", "categorical", "25.0%", "2"]
    assert lines["income"][1:] == ["numeric", "25.0%", "3", "1.5", "/", "2.5", "/", "4"]


def test_describe_json_is_one_object(tmp_path, capsys) -> None:
    assert main(["data", "describe", "--config", _config(tmp_path), "loans", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["dataset"] == "loans" and out["rows"] == 4
    cols = {c["name"]: c for c in out["columns"]}
    assert cols["city"] == {
        "name": "city",
        "type": "categorical",
        "missing": 0.25,
        "distinct": 2,
        "min": None,
        "median": None,
        "max": None,
    }
    assert (cols["age"]["min"], cols["age"]["median"], cols["age"]["max"]) == (30, 40, 50)


def test_describe_shows_the_types_the_dataset_sets(tmp_path, capsys) -> None:
    dataset = "{path: d.csv, label: y, columns: {age: categorical, income: ignore}}"
    assert main(["data", "describe", "--config", _config(tmp_path, dataset), "loans"]) == 0
    lines = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[2:]}
    assert lines["age"][1:4] == ["categorical", "25.0%", "3"]
    assert lines["income"][1] == "ignore"


def test_describe_reads_parquet(tmp_path, capsys) -> None:
    data = pa.table({"id": ["a", "b", "c"], "x": [1.0, None, 3.0], "w": ["u", "v", "u"]})
    pq.write_table(data, tmp_path / "d.parquet")
    config = _config(tmp_path, "{path: d.parquet, format: parquet}")
    assert main(["data", "describe", "--config", config, "loans", "--json"]) == 0
    cols = {c["name"]: c for c in json.loads(capsys.readouterr().out)["columns"]}
    assert cols["x"]["type"] == "numeric" and cols["x"]["missing"] == 1 / 3
    assert cols["x"]["median"] == 2.0 and cols["w"]["distinct"] == 2


def test_describe_errors_name_the_datasets_or_the_file(tmp_path, capsys) -> None:
    config = _config(tmp_path)
    assert main(["data", "describe", "--config", config, "nope"]) == 2
    assert "has no dataset 'nope'; its datasets: loans" in capsys.readouterr().err
    (tmp_path / "d.csv").unlink()
    assert main(["data", "describe", "--config", config, "loans"]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_describe_summarises_a_libsvm_dataset(tmp_path, capsys) -> None:
    (tmp_path / "d.svm").write_text("1 1:0.5 7:2\n-1 3:-1\n1 1:1 3:4 9:0.25\n")
    config = _config(tmp_path, "{path: d.svm, format: libsvm, label: y}")
    assert main(["data", "describe", "--config", config, "loans"]) == 0
    out = capsys.readouterr().out
    assert "dataset 'loans': 3 rows, LIBSVM, 4 features (indices 1 to 9)" in out
    assert "nonzeros a row: 1 / 2 / 3 (min / median / max; 6 in all)" in out
    assert "values: -1 to 4" in out and "labels: -1 (1 row), 1 (2 rows)" in out
    assert main(["data", "describe", "--config", config, "loans", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["dataset"] == "loans" and summary["format"] == "libsvm"
    assert summary["rows"] == 3 and summary["features"] == 4
    assert summary["nonzeros_per_row"] == {"min": 1, "median": 2.0, "max": 3}
    assert summary["labels"] == {"-1": 1, "1": 2}


def test_describe_names_a_nested_parquet_column_and_exits_2(tmp_path, capsys) -> None:
    data = pa.table({"id": ["a", "b"], "tags": pa.array([[1, 2], [3]])})
    pq.write_table(data, tmp_path / "d.parquet")
    config = _config(tmp_path, "{path: d.parquet, format: parquet}")
    assert main(["data", "describe", "--config", config, "loans"]) == 2
    err = capsys.readouterr().err
    assert "column 'tags'" in err and "list<" in err and "tags: ignore" in err
    assert "internal error" not in err
