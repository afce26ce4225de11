"""Dataset loading: CSV and LIBSVM, and a named error for each malformed input."""

from __future__ import annotations

import pytest
import scipy.sparse as sp
from vfl.contract.spec import TableSource
from vfl.party.errors import DataError
from vfl.party.tables.load import load_table
from vfl.party.tables.table import with_columns

from tests.support.data import shared_data


def test_breast_csv(breast_files) -> None:
    guest, host = breast_files
    g = load_table(TableSource(preprocess="none", path=str(guest), label="y"), "g")
    h = load_table(TableSource(preprocess="none", path=str(host)), "h")
    assert g.features.shape == (569, 10) and set(g.labels) == {0.0, 1.0}
    assert h.features.shape == (569, 20) and h.labels is None
    assert list(g.ids) == list(h.ids)


def test_a9a_libsvm_split_files() -> None:
    guest, host = shared_data("a9a", "a9a.guest"), shared_data("a9a", "a9a.host")
    g = load_table(
        TableSource(preprocess="none", path=str(guest), format="libsvm", id="auto", label="y"), "g"
    )
    h = load_table(TableSource(preprocess="none", path=str(host), format="libsvm", id="auto"), "h")
    assert g.rows == h.rows == 32561 and g.ids[5] == "5" and set(g.labels) == {-1.0, 1.0}
    assert h.features.sum(axis=1).max() <= 14


def test_libsvm_line_number_ids(tmp_path) -> None:
    f = tmp_path / "d.svm"
    f.write_text("1 1:0.5 3:1\n-1 2:2\n")
    t = load_table(
        TableSource(preprocess="none", path=str(f), format="libsvm", id="auto", label="y"), "d"
    )
    assert list(t.ids) == ["0", "1"] and t.feature_names == ("f1", "f2", "f3")
    assert t.features.toarray().tolist() == [[0.5, 0, 1], [0, 2, 0]]


def test_libsvm_keeps_only_the_columns_that_occur_and_maps_others_by_name(tmp_path) -> None:
    f = tmp_path / "d.svm"
    f.write_text("a 7:0.5 900000:1\nb 3:2 7:1\n")
    t = load_table(TableSource(preprocess="none", path=str(f), format="libsvm", id="first"), "d")
    assert sp.isspmatrix_csr(t.features) and t.feature_names == ("f3", "f7", "f900000")
    assert t.features.toarray().tolist() == [[0, 0.5, 1], [2, 1, 0]]
    # Execute: rows to score with the columns of a model trained on f7, f8 and f3
    scored = with_columns(t, ("f7", "f8", "f3"), "dataset 'd'")
    # Assert: f900000 never trained (dropped), f8 absent here (zeros)
    assert scored.features.toarray().tolist() == [[0.5, 0, 0], [1, 0, 2]]
    (tmp_path / "c.csv").write_text("id,x1,x2\n1,0.5,1\n")
    dense = load_table(TableSource(preprocess="none", path=str(tmp_path / "c.csv")), "c")
    with pytest.raises(DataError, match="feature columns"):
        with_columns(dense, ("x2", "x1"), "dataset 'c'")  # CSV columns must match exactly


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
        load_table(TableSource(preprocess="none", path=str(f), **cfg), "bad")
    assert fragment in str(err.value)


def test_missing_file(tmp_path) -> None:
    with pytest.raises(DataError, match="does not exist"):
        load_table(TableSource(preprocess="none", path=str(tmp_path / "none.csv")), "x")


def test_bad_libsvm_pair(tmp_path) -> None:
    f = tmp_path / "d.svm"
    f.write_text("1 1:0.5 x:y\n")
    with pytest.raises(DataError, match="index:value"):
        load_table(
            TableSource(preprocess="none", path=str(f), format="libsvm", id="auto", label="y"), "d"
        )


HEADER = "cust_no,default_flag,secret_income,secret_age"
SECRETS = ("private_table", "cust_no", "default_flag", "secret_income", "secret_age")


@pytest.mark.parametrize(
    ("content", "cfg"),
    [
        ("", {}),
        (f"{HEADER}\n", {}),
        (f"{HEADER}\n7,0,1234.5\n", {}),
        (f"{HEADER}\n7,0,1234.5,abc\n", {}),
        (f"{HEADER}\n7,0,1234.5,nan\n", {}),
        (f"{HEADER}\n7,nan,1234.5,41\n", {"label": "default_flag"}),
        (f"{HEADER}\n7,0,1234.5,41\n", {"id": "customer"}),
        (f"{HEADER}\n7,0,1234.5,41\n", {"label": "default"}),
        (f"{HEADER}\n7,0,1234.5,4.1\n", {"categorical": ["secret_age"]}),
        ("@7 1 1 1:1234.5\n", {"format": "libsvm", "id": "auto", "label": "y"}),
        ("@7 abc 1:1234.5\n", {"format": "libsvm", "id": "auto", "label": "y"}),
        ("@7 1 1:1234.5 9:abc\n", {"format": "libsvm", "id": "auto", "label": "y"}),
    ],
)
def test_a_data_errors_public_form_names_no_file_column_or_value(tmp_path, content, cfg) -> None:
    # what a data error says across organisations: the dataset and the kind of problem
    path = tmp_path / "private_table.csv"
    path.write_text(content)
    source = TableSource(preprocess="none", path=str(path), **{"id": "cust_no", **cfg})
    with pytest.raises(DataError) as err:
        load_table(source, "loans")
    public = err.value.public
    assert public.startswith("dataset 'loans'") and public != str(err.value)
    leaks = [s for s in (str(tmp_path), *SECRETS, "1234.5", "abc", "4.1") if s in public]
    assert not leaks, public
