"""Dataset loading: CSV and LIBSVM, and a named error for each malformed input."""

from __future__ import annotations

import pytest

from coordinator.spec import TableSource
from party.data import load_table
from party.errors import DataError
from tests.support.data import shared_data


def test_breast_csv(breast_files) -> None:
    guest, host = breast_files
    g = load_table(TableSource(path=str(guest), label="y"), "g")
    h = load_table(TableSource(path=str(host)), "h")
    assert g.features.shape == (569, 10) and set(g.labels) == {0.0, 1.0}
    assert h.features.shape == (569, 20) and h.labels is None
    assert list(g.ids) == list(h.ids)


def test_a9a_libsvm_split_files() -> None:
    guest, host = shared_data("a9a", "a9a.guest"), shared_data("a9a", "a9a.host")
    g = load_table(TableSource(path=str(guest), format="libsvm", id="auto", label="y"), "g")
    h = load_table(TableSource(path=str(host), format="libsvm", id="auto"), "h")
    assert g.rows == h.rows == 32561 and g.ids[5] == "5" and set(g.labels) == {-1.0, 1.0}
    assert h.features.sum(axis=1).max() <= 14


def test_libsvm_line_number_ids(tmp_path) -> None:
    f = tmp_path / "d.svm"
    f.write_text("1 1:0.5 3:1\n-1 2:2\n")
    t = load_table(TableSource(path=str(f), format="libsvm", id="auto", label="y"), "d")
    assert list(t.ids) == ["0", "1"] and t.features.tolist() == [[0.5, 0, 1], [0, 2, 0]]


@pytest.mark.parametrize(
    ("content", "cfg", "fragment"),
    [
        ("id,y,x\n1,0,0.5\n", {"id": "key"}, "id column 'key' is not in the header"),
        ("id,y,x\n1,0,0.5\n", {"label": "target"}, "label column 'target'"),
        ("id,y,x\n1,0,abc\n", {"label": "y"}, "non-numeric value 'abc'"),
        ("id,y,x\n1,0,nan\n", {"label": "y"}, "NaN or infinite"),
        ("id,y,x\n1,0\n", {"label": "y"}, "has 2 cells"),
        ("id,y,x\n", {"label": "y"}, "no data rows"),
        ("", {}, "is empty"),
    ],
)
def test_bad_csv(tmp_path, content, cfg, fragment) -> None:
    f = tmp_path / "bad.csv"
    f.write_text(content)
    with pytest.raises(DataError) as err:
        load_table(TableSource(path=str(f), **cfg), "bad")
    assert fragment in str(err.value)


def test_missing_file(tmp_path) -> None:
    with pytest.raises(DataError, match="does not exist"):
        load_table(TableSource(path=str(tmp_path / "none.csv")), "x")


def test_bad_libsvm_pair(tmp_path) -> None:
    f = tmp_path / "d.svm"
    f.write_text("1 1:0.5 x:y\n")
    with pytest.raises(DataError, match="index:value"):
        load_table(TableSource(path=str(f), format="libsvm", id="auto", label="y"), "d")
