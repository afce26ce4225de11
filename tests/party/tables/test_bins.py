"""A tree model's preprocessing: each party's columns as bins fitted on its own training
rows, kept as JSON with its model part and applied identically wherever it scores."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from vfl.party.errors import DataError
from vfl.party.tables.load import read_raw
from vfl.party.tables.preprocess.bins import EMPTY_BIN, Binned, fit_binned
from vfl.party.tables.preprocess.fit import fit
from vfl.party.tables.preprocess.fitted import EMPTY, UNKNOWN, Categorical
from vfl.party.tables.preprocess.preprocessor import Preprocessor

from tests.party.tables.test_preprocess import raw_csv, source


def test_quantile_bins_cut_halfway_between_values_and_hold_similar_counts() -> None:
    values = np.random.default_rng(0).normal(size=10_000).astype(np.float32)
    col = fit_binned("x", values, 16)
    assert isinstance(col, Binned) and len(col.edges) == 15 and col.bins == 17
    codes = 1 + np.searchsorted(np.asarray(col.edges), values.astype(np.float64))
    counts = np.bincount(codes, minlength=17)[1:]
    assert counts.min() > 500 and counts.max() < 750  # 625 each, give or take
    assert all(not np.any(values == e) for e in col.edges)  # no value on an edge


def test_a_column_of_few_values_gets_a_bin_per_value_and_a_heavy_value_its_own() -> None:
    few = np.array([3, 1, 2, 3, 3, 1] * 10, dtype=np.float32)
    assert fit_binned("x", few, 32).edges == (1.5, 2.5)
    heavy = np.concatenate([np.zeros(900), np.arange(1, 101)]).astype(np.float32)
    col = fit_binned("x", heavy, 8)
    assert isinstance(col, Binned) and col.edges[0] == 0.5  # zero alone in bin 1


def test_a_table_as_bins_empty_cells_and_words_included(tmp_path: Path) -> None:
    raw = read_raw(source(raw_csv(tmp_path / "t.csv")), "t")
    # Execute
    pre = fit(raw, np.arange(300), "auto", bins=8)
    table, drift = pre.apply(raw, "t")
    # Assert: numbers as codes 0 (empty) .. 8, words as their own codes
    cols = {c.name: c for c in pre.columns}
    assert {n: c.kind for n, c in cols.items()} == {
        "amount": "binned",
        "age": "binned",
        "flag": "binned",
        "city": "categorical",
    }
    assert pre.kinds()["amount"] == "numeric"  # read as numbers at scoring
    amount = table.features[:, list(table.feature_names).index("amount")]
    assert set(np.unique(amount)) <= set(range(9)) and np.sum(amount == EMPTY_BIN) == 16
    assert isinstance(cols["amount"], Binned) and cols["amount"].missing
    assert sorted(np.unique(table.features[:, list(table.feature_names).index("flag")])) == [1, 2]
    assert table.categorical is not None and table.cardinalities == (6,)
    assert set(np.unique(table.categorical)) == {2, 3, 4, 5}
    assert not drift.missing  # the training rows had empty cells


def test_the_bins_of_a_model_part_apply_identically_elsewhere(tmp_path: Path) -> None:
    # Prepare: fitted on the training table; a scoring table with a new word, an empty
    # cell where training had none and a value beyond the training range
    raw = read_raw(source(raw_csv(tmp_path / "t.csv")), "t")
    pre = fit(raw, None, "auto", bins=8)
    again = Preprocessor.model_validate_json(pre.model_dump_json())
    lines = (tmp_path / "t.csv").read_text().splitlines()
    lines[1] = "0,0,1e12,,1,rome"
    (tmp_path / "s.csv").write_text("\n".join(lines) + "\n")
    scored = read_raw(source(tmp_path / "s.csv"), "s", again.mode, again.kinds())
    # Execute
    a, _ = pre.apply(raw, "t")
    b, drift = again.apply(scored, "s")
    # Assert: every other row the same codes; the changed row drifts into known codes
    assert np.array_equal(a.features[1:], b.features[1:])
    assert a.categorical is not None and b.categorical is not None
    assert np.array_equal(a.categorical[1:], b.categorical[1:])
    names = list(b.feature_names)
    assert b.features[0, names.index("amount")] == 8  # the last bin: beyond the last edge
    assert b.features[0, names.index("age")] == EMPTY_BIN
    assert b.categorical[0, 0] == UNKNOWN and EMPTY == 1
    assert drift.out_of_range == {"amount": 1} and drift.unknown == {"city": 1}
    assert drift.missing == {"age": 1}


def test_words_beyond_the_bins_share_the_unknown_bin(tmp_path: Path) -> None:
    cities = tuple(f"c{i}" for i in range(20))
    raw = read_raw(source(raw_csv(tmp_path / "t.csv", city=cities)), "t")
    pre = fit(raw, None, "auto", bins=5)
    city = next(c for c in pre.columns if c.name == "city")
    assert isinstance(city, Categorical) and len(city.vocabulary or ()) == 4
    assert city.cardinality == 6  # codes 0 (the rest) .. 5: within the bins and the empty


def test_a_libsvm_table_is_refused_for_trees(tmp_path: Path) -> None:
    path = tmp_path / "t.svm"
    path.write_text("1 1:0.5 3:1\n0 2:1\n")
    raw = read_raw(source(path, format="libsvm"), "t")
    with pytest.raises(DataError, match="LIBSVM table: tree models take CSV or Parquet"):
        fit(raw, None, "auto", bins=8)
