"""A party's WOE bins: right-closed numeric bins with the empty cell last, words with one
bin of every other word, monotone merging of the ordered bins, LIBSVM refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from vfl.party.analysis.binning import ALL_EMPTY, ONE_VALUE, column_bins
from vfl.party.errors import DataError
from vfl.party.tables.load import read_raw

from tests.party.tables.test_preprocess import source


def test_bins_in_output_order(tmp_path: Path) -> None:
    # Prepare: values 1..8 (one empty cell), a constant, an empty column, words
    path = tmp_path / "t.csv"
    rows = ["id,y,x,c,e,w"]
    words = ["a", "a", "b", "b", "c", "a", "zz", "b", ""]
    for i in range(9):
        x = "" if i == 8 else str(i + 1)
        rows.append(f"{i},{i % 2},{x},7,,{words[i]}")
    path.write_text("\n".join(rows) + "\n")
    raw = read_raw(source(path), "t")
    # Execute
    x, c, e, w = column_bins(raw, np.arange(9), 4, "bank")
    # Assert: x cut at quantiles, right-closed, the empty cell in the last bin
    assert x.edges == (2.5, 4.5, 6.5) and x.empty and x.count == 5
    assert x.codes.tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4]
    assert (c.note, c.count, c.codes.tolist()) == (ONE_VALUE, 1, [0] * 9)
    assert (e.note, e.count) == (ALL_EMPTY, 2) and set(e.codes.tolist()) == {1}
    # words seen twice or more, then every other word ('c', 'zz'), then the empty cell
    assert w.categories == ("a", "b") and w.empty and w.count == 4
    assert w.codes.tolist() == [0, 0, 1, 1, 2, 0, 2, 1, 3]
    # merging the ordered bins keeps the empty cell last and alone
    merged = x.with_starts([0, 2])
    assert merged.edges == (4.5,) and merged.codes.tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 2]


def test_one_value_beside_empty_cells_is_not_noted_as_uninformative(tmp_path: Path) -> None:
    # Prepare: a number and a word, each one value in the first five rows and empty in
    # the last five, the label 1 exactly where they are present
    path = tmp_path / "t.csv"
    rows = ["id,y,x,w"] + [f"{i},1,3,a" for i in range(5)] + [f"{i},0,," for i in range(5, 10)]
    path.write_text("\n".join(rows) + "\n")
    raw = read_raw(source(path), "t")
    # Execute
    x, w = column_bins(raw, np.arange(10), 4, "bank")
    # Assert: present against empty splits the label, so neither carries "one value"
    assert x.empty and x.note == "" and x.codes.tolist() == [0] * 5 + [1] * 5
    assert w.empty and w.note == ""


def test_a_libsvm_table_is_refused_naming_the_party(tmp_path: Path) -> None:
    path = tmp_path / "t.svm"
    path.write_text("1 1:0.5 3:1\n0 2:1\n")
    raw = read_raw(source(path, format="libsvm"), "t")
    with pytest.raises(DataError, match="party 'shop'.*LIBSVM table; WOE and IV take CSV"):
        column_bins(raw, np.arange(2), 10, "shop")
