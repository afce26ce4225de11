"""bench/raw_data.py's raw tables: their columns, byte-identical files for the same rows and
seed, the same rows and labels in every variant, raw values as a bank holds them, the
standardised variant z-scored, and the messy variant's words and ~2% empty cells."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from tests.support.bench import bench_module

ROWS = 3_000


@pytest.fixture(scope="module")
def raw_data():
    yield from bench_module("raw_data")


def _read(path: str) -> tuple[list[str], list[list[str]]]:
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    return rows[0], rows[1:]


def _written(raw_data, folder: Path, variant: str, seed: int = 0) -> dict:
    folder.mkdir()
    tables = raw_data.raw_tables(folder, ROWS, seed, variant)
    return {party: _read(t.path) for party, t in tables.items()}


def test_columns_and_sources(raw_data, tmp_path: Path) -> None:
    tables = raw_data.raw_tables(tmp_path, ROWS, 0, "messy")
    assert tables["bank"].label == "y" and tables["shop"].label is None
    assert tables["bank"].id == tables["shop"].id == "id"
    bank, rows = _read(tables["bank"].path)
    shop, _ = _read(tables["shop"].path)
    assert bank[:2] == ["id", "y"] and bank[-1] == "education"
    assert shop[0] == "id" and shop[-1] == "city"
    assert len(bank) == 11 and len(shop) == 7 and len(rows) == ROWS
    with pytest.raises(ValueError, match="variant"):
        raw_data.raw_tables(tmp_path, ROWS, 0, "clean")


@pytest.mark.parametrize("variant", ["raw", "standardised", "messy"])
def test_same_rows_and_seed_give_the_same_bytes(raw_data, tmp_path: Path, variant: str) -> None:
    files = []
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        (tmp_path / name).mkdir()
        tables = raw_data.raw_tables(tmp_path / name, ROWS, seed, variant)
        files.append({p: Path(t.path).read_bytes() for p, t in tables.items()})
    assert files[0] == files[1]
    assert files[0]["bank"] != files[2]["bank"] and files[0]["shop"] != files[2]["shop"]


def test_variants_share_rows_and_labels(raw_data, tmp_path: Path) -> None:
    raw = _written(raw_data, tmp_path / "raw", "raw")
    std = _written(raw_data, tmp_path / "std", "standardised")
    messy = _written(raw_data, tmp_path / "messy", "messy")
    for party in ("bank", "shop"):
        assert std[party][0] == raw[party][0]  # same header
        assert messy[party][0][:-1] == raw[party][0]  # plus the words column
        lead = 2 if party == "bank" else 1  # id (and y) identical everywhere
        for other in (std, messy):
            assert [r[:lead] for r in other[party][1]] == [r[:lead] for r in raw[party][1]]
    y = np.array([int(r[1]) for r in raw["bank"][1]])
    assert 0.15 < y.mean() < 0.35


def test_raw_values_look_as_held(raw_data, tmp_path: Path) -> None:
    header, rows = _written(raw_data, tmp_path / "raw", "raw")["bank"]
    x = {name: np.array([float(r[j]) for r in rows]) for j, name in enumerate(header)}
    assert x["age"].min() >= 21 and x["age"].max() <= 75
    assert np.all(x["age"] == np.round(x["age"]))
    for code in ("pay_0", "pay_2", "pay_3"):
        assert x[code].min() >= -2 and x[code].max() <= 8
        assert np.all(x[code] == np.round(x[code]))
    for amount in ("limit_bal", "bill_amt1", "pay_amt1"):  # heavy right tails
        assert x[amount].min() >= 0
        assert np.percentile(x[amount], 99) > 5 * np.median(x[amount])
    assert np.median(x["limit_bal"]) > 50_000 and x["bill_amt1"].max() > 300_000


def test_standardised_columns_are_z_scored(raw_data, tmp_path: Path) -> None:
    for party, (header, rows) in _written(raw_data, tmp_path / "s", "standardised").items():
        lead = 2 if party == "bank" else 1
        x = np.array([[float(c) for c in r[lead:]] for r in rows])
        assert x.shape == (ROWS, len(header) - lead)
        np.testing.assert_allclose(x.mean(axis=0), 0, atol=1e-5)
        np.testing.assert_allclose(x.std(axis=0), 1, atol=1e-4)


def test_messy_has_words_and_about_two_percent_empty_cells(raw_data, tmp_path: Path) -> None:
    messy = _written(raw_data, tmp_path / "messy", "messy")
    words = {"bank": set(raw_data.EDUCATION), "shop": set(raw_data.CITIES)}
    for party, (_header, rows) in messy.items():
        lead = 2 if party == "bank" else 1
        cells = np.array([r[lead:] for r in rows])
        assert not any(c == "" for r in rows for c in r[:lead])  # id and y always there
        share = float(np.mean(cells == ""))
        assert 0.015 < share < 0.025, share
        assert np.all(np.mean(cells == "", axis=0) > 0.005)  # spread over every column
        assert set(cells[:, -1]) - {""} == words[party]
