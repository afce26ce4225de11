"""Per-party preprocessing: fitted on the training rows only, JSON round trip, the same
inputs wherever it is applied, schema checks and drift counts, secure-layer bounds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from vfl.contract.spec import TableSource
from vfl.party.errors import DataError
from vfl.party.tables.load import load_table, read_raw
from vfl.party.tables.preprocess.fit import check_secure_bounds, fit
from vfl.party.tables.preprocess.fitted import (
    EMPTY,
    MISSING_SUFFIX,
    UNKNOWN,
    Z_LIMIT,
    Categorical,
    Numeric,
)
from vfl.party.tables.preprocess.preprocessor import Preprocessor

ROWS = 400


def raw_csv(path: Path, rows: int = ROWS, seed: int = 0, city: tuple[str, ...] = ()) -> Path:
    """id, y, amount (lognormal, ~hundreds of thousands), age, flag (0/1), city (words),
    with empty cells in amount."""
    rng = np.random.default_rng(seed)
    amount = np.round(rng.lognormal(11, 1.2, rows), 2)
    age = rng.integers(21, 76, rows)
    flag = rng.integers(0, 2, rows)
    cities = city or ("paris", "lyon", "nice", "lille")
    words = rng.choice(cities, rows, p=None)
    lines = ["id,y,amount,age,flag,city"]
    for i in range(rows):
        cell = "" if i % 25 == 3 else repr(float(amount[i]))
        lines.append(f"{i},{i % 2},{cell},{age[i]},{flag[i]},{words[i]}")
    path.write_text("\n".join(lines) + "\n")
    return path


def source(path: Path, **kw) -> TableSource:
    return TableSource(path=str(path), label="y", **kw)


def test_auto_scales_logs_imputes_and_encodes_words_from_the_raw_table(tmp_path: Path) -> None:
    raw = read_raw(source(raw_csv(tmp_path / "t.csv")), "t")
    # Execute
    pre = fit(raw, None, "auto")
    table, _ = pre.apply(raw, "t")
    # Assert: amount logged (skewed, non-negative), age not; flag untouched; city categorical
    cols = {c.name: c for c in pre.columns}
    assert isinstance(cols["amount"], Numeric) and cols["amount"].log
    assert isinstance(cols["age"], Numeric) and not cols["age"].log
    assert cols["amount"].indicator and not cols["age"].indicator
    city = cols["city"]
    assert isinstance(city, Categorical) and len(city.vocabulary or ()) == 4 and city.one_hot
    names = ("amount", "age", "flag", "amount" + MISSING_SUFFIX, *city.one_hot_names)
    assert table.feature_names == names and city.one_hot_names[:2] == (
        "city=(unknown)",
        "city=(empty)",
    )
    x = table.features
    assert np.abs(x).max() <= Z_LIMIT and np.all(np.isfinite(x))
    assert abs(x[:, 0].mean()) < 0.05 and abs(x[:, 0].std() - 1) < 0.05
    assert set(np.unique(x[:, 2])) <= {0.0, 1.0}  # a 0/1 column stays as it is
    missing = x[:, 3]
    assert missing.sum() == 16 and np.all(missing[3::25] == 1)
    words = x[:, 4:]  # one-hot: one 1 per row; every city known (not unknown, not empty)
    assert np.all(words.sum(axis=1) == 1) and not words[:, :2].any()
    assert table.categorical is None and table.cardinalities == ()


def test_a_large_vocabulary_goes_through_an_embedding(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("id,y,shop\n" + "".join(f"{i},{i % 2},s{i % 40}\n" for i in range(400)))
    table = load_table(source(path), "t")
    assert table.feature_names == () and table.cardinalities == (42,)
    assert table.categorical is not None and table.categorical.min() >= 2


def test_statistics_come_from_the_training_rows_only(tmp_path: Path) -> None:
    raw = read_raw(source(raw_csv(tmp_path / "t.csv")), "t")
    rows = np.arange(0, ROWS, 2)
    pre = fit(raw, rows, "zscore")
    age = next(c for c in pre.numeric if c.name == "age")
    values = raw.column("age").values
    assert values is not None
    assert age.center == pytest.approx(values[rows].mean(), rel=1e-6)
    assert age.center != pytest.approx(values.mean(), rel=1e-6)


def test_a_fitted_preprocessor_is_json_and_gives_the_same_inputs_after_a_round_trip(
    tmp_path: Path,
) -> None:
    raw = read_raw(source(raw_csv(tmp_path / "t.csv")), "t")
    pre = fit(raw, np.arange(300), "auto")
    text = pre.model_dump_json()
    again = Preprocessor.model_validate_json(text)
    a, _ = pre.apply(raw, "t")
    b, _ = again.apply(raw, "t")
    assert again == pre and np.array_equal(a.features, b.features)
    assert np.array_equal(a.categorical, b.categorical)


def test_new_rows_count_unknown_categories_values_out_of_range_and_new_empty_cells(
    tmp_path: Path,
) -> None:
    pre = fit(read_raw(source(raw_csv(tmp_path / "t.csv")), "t"), None, "auto")
    new = tmp_path / "new.csv"
    new.write_text(
        "id,y,amount,age,flag,city\n"
        "a,0,1e12,30,1,paris\n"  # amount far beyond the training range
        "b,1,5000,,0,berlin\n"  # age empty (never in training), a city never seen
        "c,0,,40,1,\n"  # amount empty (seen in training: indicator), city empty
    )
    table, drift = pre.apply(read_raw(source(new), "new", "auto", pre.kinds()), "new")
    assert drift.out_of_range == {"amount": 1}
    assert drift.unknown == {"city": 1} and drift.missing == {"age": 1}
    assert drift.totals() == {"out_of_range": 1, "unknown_categories": 1, "unexpected_missing": 1}
    city = table.features[:, table.feature_names.index("city=(unknown)") :]
    assert city[1, UNKNOWN] == 1 and city[2, EMPTY] == 1 and city.sum() == 3
    assert np.abs(table.features).max() <= Z_LIMIT


def test_a_rare_category_goes_to_the_unknown_bucket_in_training_too(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("id,y,w\n" + "".join(f"{i},{i % 2},{'x' if i else 'once'}\n" for i in range(9)))
    raw = read_raw(source(path), "t")
    pre = fit(raw, None, "auto")
    table, drift = pre.apply(raw, "t")
    assert pre.categorical[0].vocabulary == ("x",)
    assert table.features[0, UNKNOWN] == 1 and table.features[1:, UNKNOWN].sum() == 0
    assert drift.unknown == {"w": 1}


@pytest.mark.parametrize(
    ("header", "row", "fragment"),
    [
        ("id,y,amount,age,flag", "a,0,1,30,1", "lacks the model's column(s) 'city'"),
        ("id,y,amount,age,flag,city,zip", "a,0,1,30,1,nice,75001", "not trained on 'zip'"),
        ("id,y,amount,age,flag,city", "a,0,lots,30,1,nice", "'amount' held numbers"),
    ],
)
def test_rows_with_other_columns_are_a_named_error(
    tmp_path: Path, header: str, row: str, fragment: str
) -> None:
    pre = fit(read_raw(source(raw_csv(tmp_path / "t.csv")), "t"), None, "auto")
    new = tmp_path / "new.csv"
    new.write_text(f"{header}\n{row}\n")
    with pytest.raises(DataError) as err:
        pre.apply(read_raw(source(new), "new", "auto", pre.kinds()), "dataset 'new'")
    assert fragment in str(err.value)
    assert "'zip'" not in err.value.public and "amount" not in err.value.public


def test_overrides_make_a_number_column_categorical_and_leave_a_column_out(
    tmp_path: Path,
) -> None:
    path = raw_csv(tmp_path / "t.csv")
    cfg = source(path, columns={"age": "categorical", "amount": "ignore"})
    table = load_table(cfg, "t")
    assert table.feature_names[0] == "flag" and "amount" not in table.feature_names
    assert table.cardinalities == (57,)  # age: 55 ages seen twice or more, unknown, empty
    with pytest.raises(DataError, match="'city' is set numeric but holds 'paris'|'city' is set"):
        load_table(source(path, columns={"city": "numeric"}), "t")
    with pytest.raises(DataError, match="overridden column 'zip' is not in the header"):
        load_table(source(path, columns={"zip": "ignore"}), "t")


def test_none_keeps_todays_behaviour_and_refuses_words_and_empty_cells(tmp_path: Path) -> None:
    path = tmp_path / "n.csv"
    path.write_text("id,y,a,b\n1,0,250000,3\n2,1,125000.5,7\n")
    table = load_table(source(path, preprocess="none"), "n")
    assert table.features.tolist() == [[250000, 3], [125000.5, 7]]
    with pytest.raises(DataError, match="non-numeric value"):
        load_table(source(raw_csv(tmp_path / "t.csv"), preprocess="none"), "t")


def test_blindfl_refuses_unscaled_values_before_keys_naming_column_and_fix(tmp_path: Path) -> None:
    path = tmp_path / "n.csv"
    path.write_text("id,y,limit_bal,b\n1,0,250000,3\n2,1,125000.5,7\n")
    raw = read_raw(source(path, preprocess="none"), "loans")
    with pytest.raises(DataError) as err:
        check_secure_bounds(raw, "none", "bank")
    text = str(err.value)
    for part in ("party 'bank'", "dataset 'loans'", "'limit_bal'", "250000", "preprocess"):
        assert part in text
    assert "slot" not in text and "bit" not in text and str(tmp_path) not in err.value.public
    check_secure_bounds(read_raw(source(path), "loans"), "auto", "bank")  # bounded: fine


def test_libsvm_keeps_sparsity_and_binary_columns_and_scales_others_by_deviation(
    tmp_path: Path,
) -> None:
    f = tmp_path / "d.svm"
    f.write_text("1 1:1 3:4\n-1 2:1 3:2\n1 1:1\n")
    cfg = TableSource(path=str(f), format="libsvm", id="auto", label="y")
    table = load_table(cfg, "d")
    std = np.std([4.0, 2.0, 0.0])  # column 3, zeros included, not centred
    assert sp.issparse(table.features) and table.features.nnz == 5
    expected = np.array([[1, 0, 4 / std], [0, 1, 2 / std], [1, 0, 0]], dtype=np.float32)
    assert np.allclose(table.features.toarray(), expected)
