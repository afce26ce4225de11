"""The typed table reader (pyarrow): CSV and Parquet give the same `Table`, ids stay
text, and every malformed cell is still named with its column and line."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from vfl.contract.spec import TableSource
from vfl.party.errors import DataError
from vfl.party.tables.load import load_table, read_raw
from vfl.party.tables.reader.scan import PARQUET_BATCH
from vfl.party.tables.reader.whole import read_table


def _parquet_of(csv_path, out, id_col: str = "id") -> None:
    """The CSV's rows as Parquet, ids as text, written by pyarrow."""
    options = pacsv.ConvertOptions(column_types={id_col: pa.string()})
    pq.write_table(pacsv.read_csv(csv_path, convert_options=options), out)


def _same(a, b) -> None:
    assert list(a.ids) == list(b.ids) and a.feature_names == b.feature_names
    assert a.features.dtype == b.features.dtype == np.float32
    np.testing.assert_array_equal(a.features, b.features)
    np.testing.assert_array_equal(a.labels, b.labels)


def test_csv_and_parquet_give_the_same_table(breast_files, tmp_path) -> None:
    guest, _ = breast_files
    _parquet_of(guest, tmp_path / "guest.parquet")
    from_csv = load_table(TableSource(path=str(guest), label="y"), "g")
    from_parquet = load_table(
        TableSource(path=str(tmp_path / "guest.parquet"), format="parquet", label="y"), "g"
    )
    _same(from_csv, from_parquet)
    assert from_csv.features.shape == (569, 10) and set(from_csv.labels) == {0.0, 1.0}


def test_a_parquet_folder_of_two_files_is_one_table(breast_files, tmp_path) -> None:
    guest, _ = breast_files
    whole = pacsv.read_csv(
        guest, convert_options=pacsv.ConvertOptions(column_types={"id": pa.string()})
    )
    folder = tmp_path / "parts"
    folder.mkdir()
    pq.write_table(whole.slice(0, 300), folder / "part-0.parquet")
    pq.write_table(whole.slice(300), folder / "part-1.parquet")
    table = load_table(TableSource(path=str(folder), format="parquet", label="y"), "g")
    _same(table, load_table(TableSource(path=str(guest), label="y"), "g"))


def test_ids_stay_text_and_categoricals_are_codes(tmp_path) -> None:
    f = tmp_path / "d.csv"
    f.write_text("id,y,x, c\n007,1, 0.5 ,3\n0010,0,-2e3,0\n")
    t = load_table(TableSource(preprocess="none", path=str(f), label="y", categorical=["c"]), "d")
    assert list(t.ids) == ["007", "0010"] and t.feature_names == ("x",)
    assert t.features.tolist() == [[0.5], [-2000.0]] and t.labels.tolist() == [1.0, 0.0]
    assert t.categorical.tolist() == [[3], [0]] and t.cardinalities == (4,)
    _parquet_of(f, tmp_path / "d.parquet")
    p = load_table(
        TableSource(
            preprocess="none", path=str(tmp_path / "d.parquet"), format="parquet", label="y"
        ),
        "d",
    )
    assert list(p.ids) == ["007", "0010"]


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("id,y,x\n1,0,\n", "column 'x' has the non-numeric value '' at line 2"),
        ("id,y,x\n1,0,1\n2,1,paris\n", "column 'x' has the non-numeric value 'paris' at line 3"),
        ("id,y,x\n1,,1\n", "column 'y' has the non-numeric value '' at line 2"),
        ("id,y,x\n1,0,1\n2,1\n", "line 3 of"),
        ("id,y,x\n1,0,1,5\n", "has 4 cells, the header has 3"),
        ("id,y,x,c\n1,0,1,4.1\n", "categorical column 'c' has '4.1' at line 2"),
    ],
)
def test_bad_cells_name_column_and_line(tmp_path, content, fragment) -> None:
    f = tmp_path / "bad.csv"
    f.write_text(content)
    cat = ["c"] if ",c\n" in content else []
    with pytest.raises(DataError) as err:
        load_table(TableSource(preprocess="none", path=str(f), label="y", categorical=cat), "bad")
    assert fragment in str(err.value)
    assert str(f) not in err.value.public and "paris" not in err.value.public


def test_a_word_after_the_first_block_is_named_with_its_line(tmp_path) -> None:
    # pyarrow types a column on its first block; a word far below is still found
    f = tmp_path / "long.csv"
    rows = [f"{i},{i % 2},{i * 0.5}" for i in range(200_000)]
    rows[150_000] = "150000,0,n/a"
    f.write_text("id,y,x\n" + "\n".join(rows) + "\n")
    with pytest.raises(DataError, match="non-numeric value 'n/a' at line 150002") as err:
        load_table(TableSource(preprocess="none", path=str(f), label="y"), "long")
    assert err.value.public == "dataset 'long': a column holds a value that is not a number"


def test_parquet_errors_name_the_row(tmp_path) -> None:
    pq.write_table(pa.table({"id": ["a", "b"], "x": ["1", "many"]}), tmp_path / "d.parquet")
    with pytest.raises(DataError, match="non-numeric value 'many' at row 2"):
        load_table(
            TableSource(preprocess="none", path=str(tmp_path / "d.parquet"), format="parquet"), "d"
        )
    with pytest.raises(DataError, match="does not exist"):
        load_table(
            TableSource(preprocess="none", path=str(tmp_path / "none"), format="parquet"), "d"
        )
    (tmp_path / "junk.parquet").write_text("not parquet")
    with pytest.raises(DataError, match="cannot be read as Parquet"):
        load_table(
            TableSource(preprocess="none", path=str(tmp_path / "junk.parquet"), format="parquet"),
            "d",
        )


def test_kinds_are_inferred_without_typing(tmp_path) -> None:
    f = tmp_path / "d.csv"
    f.write_text("id,x,city,none\n1, 2 ,paris,\n2,,lyon,\n")
    read = read_table(TableSource(path=str(f)), "d")
    assert [read.kind(c) for c in range(1, 4)] == ["numeric", "text", "empty"]
    assert read.numbers(1).tolist() == [2.0, None]


def test_the_reader_tells_its_check_the_bytes_and_rows_read_so_far(tmp_path) -> None:
    # Prepare: a Parquet file of three blocks of the reader's
    rows = 3 * PARQUET_BATCH
    table = pa.table({"id": [str(i) for i in range(rows)], "x": np.arange(rows, dtype=float)})
    pq.write_table(table, tmp_path / "t.parquet")
    seen: list[tuple[int, int]] = []
    # Execute
    read_raw(
        TableSource(path=str(tmp_path / "t.parquet"), format="parquet"),
        "t",
        check=lambda read_bytes, read_rows: seen.append((read_bytes, read_rows)),
    )
    # Assert: a check before each block and one after the last, the counts only growing
    # (the polls between columns, `check(0, 0)`, left out)
    seen = seen[:1] + [s for s in seen[1:] if s != (0, 0)]
    assert len(seen) == 4 and seen[0] == (0, 0) and seen == sorted(seen)
    assert seen[-1][0] >= rows * 8  # at least the numbers' own bytes
    assert [r for _, r in seen] == [0, PARQUET_BATCH, 2 * PARQUET_BATCH, rows]


def test_a_wide_table_read_stops_within_its_columns_once_its_check_raises(tmp_path) -> None:
    # Prepare: one block of 3,000 columns; a check that raises from its second call on
    path = tmp_path / "wide.csv"
    columns = [f"c{j}" for j in range(3000)]
    path.write_text("id," + ",".join(columns) + "\n" + "1," + ",".join("0.5" for _ in columns))
    calls = []

    def check(read_bytes: int, read_rows: int) -> None:
        calls.append((read_bytes, read_rows))
        if len(calls) > 1:
            raise MemoryError("the guard failed the job")

    # Execute / Assert: stopped at the first poll within the block, not after all of it
    with pytest.raises(MemoryError):
        read_raw(TableSource(path=str(path)), "wide", check=check)
    assert calls == [(0, 0), (0, 0)]


def test_a_name_given_to_two_columns_is_named_with_the_fix(tmp_path) -> None:
    path = tmp_path / "dup.csv"
    path.write_text("id,y,a,b,a\n1,0,1,2,3\n2,1,4,5,6\n")
    with pytest.raises(DataError, match="names 'a' more than once; give each column its own"):
        load_table(TableSource(path=str(path), label="y"), "d")
