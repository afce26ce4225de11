"""Bad input gets a named `DataError` (the CLI's exit 2), never an internal error: a
Parquet column of lists or structs, a LIBSVM feature index the reader cannot hold, ids
that repeat; and a CSV that Excel wrote (a UTF-8 byte-order mark) just reads."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from vfl.contract.spec import TableSource, parse_spec
from vfl.party.errors import DataError
from vfl.party.job import PartyJob
from vfl.party.tables import describe
from vfl.party.tables.load import read_raw
from vfl.party.training.task import make_task


def _parquet(tmp_path: Path, column: pa.Array) -> Path:
    data = pa.table({"id": ["a", "b"], "y": [0, 1], "x": [1.5, 2.5], "tags": column})
    pq.write_table(data, tmp_path / "d.parquet")
    return tmp_path / "d.parquet"


@pytest.mark.parametrize(
    ("column", "kind"),
    [
        (pa.array([[1, 2], [3]]), "list<"),
        (pa.array([{"a": 1, "b": "u"}, {"a": 2, "b": "v"}]), "struct<"),
    ],
)
def test_a_nested_parquet_column_is_named_with_its_type_and_the_fix(
    tmp_path: Path, column: pa.Array, kind: str
) -> None:
    path = _parquet(tmp_path, column)
    source = TableSource(path=str(path), format="parquet", label="y")
    for read in (
        lambda: read_raw(source, "loans"),
        lambda: describe.describe_dataset(source, "loans"),
    ):
        with pytest.raises(DataError) as caught:
            read()
        message = str(caught.value)
        assert "dataset 'loans'" in message and "column 'tags'" in message
        assert kind in message and "flatten" in message and "tags: ignore" in message
        assert "tags" not in caught.value.public  # its public form names no column


def test_a_nested_parquet_column_set_ignore_is_left_out(tmp_path: Path) -> None:
    path = _parquet(tmp_path, pa.array([[1, 2], [3]]))
    source = TableSource(path=str(path), format="parquet", label="y", columns={"tags": "ignore"})
    raw = read_raw(source, "loans")
    assert raw.rows == 2 and raw.column("tags").ignored
    rows, columns = describe.describe_dataset(source, "loans")
    assert rows == 2 and {c.name: c.type for c in columns}["tags"] == "ignore"


@pytest.mark.parametrize(
    ("token", "why"),
    [
        ("100000000000000000000:1", "beyond"),  # 1e20: more than an int64 holds
        ("1e20:1", "not a non-negative integer"),
        ("-3:1", "not a non-negative integer"),
        ("2.5:1", "not a non-negative integer"),
        ("\u00b2:1", "not a non-negative integer"),  # a digit to str.isdigit, not to int
    ],
)
def test_a_libsvm_index_the_reader_cannot_hold_is_named_with_its_line(
    tmp_path: Path, token: str, why: str
) -> None:
    f = tmp_path / "d.svm"
    f.write_text(f"1 1:0.5 3:1\n0 2:1 {token}\n")
    source = TableSource(path=str(f), format="libsvm", id="line", label="y")
    with pytest.raises(DataError) as caught:
        read_raw(source, "clicks")
    message = str(caught.value)
    index = token.partition(":")[0]
    assert "line 2" in message and repr(index) in message and why in message
    assert index not in caught.value.public


def test_a_csv_with_a_utf8_byte_order_mark_reads_as_without(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_bytes("\ufeffid,y,x\n007,1,1.5\n008,0,2.5\n".encode())
    source = TableSource(path=str(path), label="y")
    raw = read_raw(source, "loans")
    assert list(raw.ids) == ["007", "008"] and raw.column("x").values.tolist() == [1.5, 2.5]
    rows, columns = describe.describe_dataset(source, "loans")
    assert rows == 2 and [c.name for c in columns] == ["id", "y", "x"]


def test_describe_summarises_a_libsvm_dataset(tmp_path: Path) -> None:
    f = tmp_path / "d.svm"
    f.write_text("1 1:0.5 7:2\n-1 3:-1\n1 1:1 3:4 9:0.25\n")
    summary = describe.describe_libsvm(
        TableSource(path=str(f), format="libsvm", label="y"), "clicks"
    )
    assert (summary.rows, summary.features, summary.nonzeros) == (3, 4, 6)
    assert (summary.first_index, summary.last_index) == (1, 9)
    assert summary.per_row == (1, 2.0, 3)
    assert (summary.value_min, summary.value_max) == (-1.0, 4.0)
    assert summary.labels == {"-1": 1, "1": 2}


def _job(ids: list[str], tmp_path: Path) -> PartyJob:
    path = tmp_path / "d.csv"
    path.write_text("id,y,x\n" + "".join(f"{i},{n % 2},{n}\n" for n, i in enumerate(ids)))
    spec = parse_spec(
        {
            "job": "dup",
            "parties": [
                {"id": "bank", "role": "active", "data": {"dataset": "d"}},
                {"id": "shop", "role": "passive", "data": {"dataset": "d"}},
            ],
        }
    )
    return PartyJob("j", spec, "bank", {"d": TableSource(path=str(path), label="y")})


def test_repeated_ids_are_a_data_error_at_prepare(tmp_path: Path) -> None:
    ids = [f"c{i}" for i in range(50)] + ["c3", "c7", "c7"]
    with pytest.raises(DataError) as caught:
        _job(ids, tmp_path).prepare()
    message = str(caught.value)
    assert "dataset 'd'" in message and "3 of 53 rows repeat an id" in message
    assert "deduplicate" in message and "c7" not in caught.value.public
    assert _job([f"c{i}" for i in range(50)], tmp_path).prepare().rows == 50
    assert np.all(_job(["a", "b"], tmp_path).prepare().ids == ["a", "b"])


@pytest.mark.parametrize("rows_before", [1, 2000], ids=["in-the-header's-block", "later"])
@pytest.mark.parametrize("where", ["id", "city"])
def test_a_csv_that_is_not_utf8_is_named_with_the_fix(
    tmp_path: Path, rows_before: int, where: str
) -> None:
    # Prepare: a Latin-1 "é" in the id column or a text column
    path = tmp_path / "d.csv"
    rows = "".join(f"c{i},{i % 2},paris\n" for i in range(rows_before)).encode()
    bad = b"z\xe9,1,paris\n" if where == "id" else b"z,1,caf\xe9\n"
    path.write_bytes(b"id,y,city\n" + rows + bad)
    source = TableSource(path=str(path), label="y")
    # Execute, Assert: every reader names the file (and the column where it can) and the fix
    for mode in ("auto", "none", "describe"):
        with pytest.raises(DataError) as caught:
            if mode == "describe":
                describe.describe_dataset(source, "loans")
            else:
                read_raw(source, "loans", mode=mode)
        message = str(caught.value)
        assert "dataset 'loans'" in message and "holds bytes that are not UTF-8 text" in message
        assert "save the file as UTF-8" in message
        assert str(path) not in caught.value.public


def test_a_parquet_bytes_column_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    column = pa.array([b"caf\xe9", b"paris"], pa.binary())
    source = TableSource(path=str(_parquet(tmp_path, column)), format="parquet", label="y")
    for read in (read_raw, describe.describe_dataset):
        with pytest.raises(DataError, match="column 'tags' of .* not UTF-8 text"):
            read(source, "loans")
    ignored = TableSource(
        path=str(_parquet(tmp_path, column)),
        format="parquet",
        label="y",
        columns={"tags": "ignore"},
    )
    assert read_raw(ignored, "loans").rows == 2
    rows, columns = describe.describe_dataset(ignored, "loans")
    assert rows == 2 and {c.name: c.type for c in columns}["tags"] == "ignore"


def test_an_infinite_label_is_named_infinite_not_nan(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_text("id,y,x\na,0,1\nb,inf,2\nc,1,3\n")
    with pytest.raises(DataError, match="the label is infinite at data row 2") as info:
        read_raw(TableSource(path=str(path), label="y"), "loans")
    assert info.value.public == (
        "dataset 'loans': a label is infinite; give every row a finite label, or drop the "
        "rows without one"
    )


def test_a_binary_task_over_three_label_values_keeps_the_values_at_home() -> None:
    with pytest.raises(DataError, match=r"3 distinct value\(s\) \[0.0, 1.0, 7.0\]") as info:
        make_task("binary", np.array([0.0, 1.0, 7.0, 1.0]))
    assert "7" not in info.value.public and "3 distinct value(s)" in info.value.public
