"""Population stability of a party's columns: bins fitted on the training rows (deciles
of numbers, frequent words, empty cells), the index against the formula, a shifted column
flagged and an unshifted one not, and what of it crosses as the party's config shares it."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest
from vfl.contract.spec import TableSource
from vfl.party.tables.load import read_raw
from vfl.party.tables.preprocess.fit import fit
from vfl.party.tables.stability import (
    FLOOR,
    StabilityReference,
    fit_reference,
    index,
    level,
    summary,
)


def table(path: Path, rng: np.random.Generator, shift: float, city_of_new: float) -> Path:
    """A table of an amount (log-normal, moved by `shift` standard deviations), a steady
    score, a city (a share `city_of_new` of rows in a city training never saw) and empty
    cells."""
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "amount", "steady", "city"])
        for i in range(4000):
            amount = "" if rng.random() < 0.05 else f"{math.exp(rng.normal(shift, 1)):.4f}"
            city = "Atlantis" if rng.random() < city_of_new else rng.choice(["Oslo", "Rome"])
            w.writerow([f"r{i}", amount, f"{rng.normal():.5f}", city])
    return path


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    folder = tmp_path_factory.mktemp("stability")
    rng = np.random.default_rng(0)
    return {
        name: read_raw(TableSource(path=str(table(folder / f"{name}.csv", rng, *args))), name)
        for name, args in {"train": (0, 0), "same": (0, 0), "moved": (1.0, 0.3)}.items()
    }


def reference(raw) -> StabilityReference:
    rows = np.arange(raw.rows)
    return fit_reference(raw, rows, fit(raw, rows, "auto"))


def test_bins_hold_the_training_rows_counts_and_round_trip_as_json(tables) -> None:
    ref = reference(tables["train"])
    amount, steady, city = ref.columns
    assert (amount.kind, steady.kind, city.kind) == ("numeric", "numeric", "words")
    assert len(amount.edges) == 9 and sum(amount.counts) == 4000
    assert 150 < amount.counts[0] < 250  # the empty cells' bin
    assert set(city.words) == {"Oslo", "Rome"} and city.counts[:2] == (0, 0)
    assert StabilityReference.model_validate_json(ref.model_dump_json()) == ref
    codes = ref.codes(tables["train"])  # the training rows against their own bins: 0
    assert all(v == 0.0 for v in ref.indexes(codes).values())


def test_a_shifted_column_is_flagged_and_an_unshifted_one_is_not(tables) -> None:
    ref = reference(tables["train"])
    same = ref.indexes(ref.codes(tables["same"]))
    moved = ref.indexes(ref.codes(tables["moved"]))
    assert all(level(v) == "stable" for v in same.values()), same
    assert level(moved["amount"]) == "shift" and level(moved["city"]) == "shift", moved
    assert level(moved["steady"]) == "stable", moved


def test_the_index_is_the_formula_with_empty_bins_floored() -> None:
    e, a = np.array([50, 30, 20, 0]), np.array([20, 30, 40, 10])
    pe, pa = np.maximum(e / 100, FLOOR), np.maximum(a / 100, FLOOR)
    assert index(e, a) == pytest.approx(float(np.sum((pa - pe) * np.log(pa / pe))), abs=1e-15)
    assert index(e, e * 3) == 0.0 and index(e, np.zeros(4)) == 0.0
    assert (level(0.0999), level(0.1), level(0.2499), level(0.25)) == (
        "stable",
        "watch",
        "watch",
        "shift",
    )


def test_what_crosses_is_as_the_config_shares_it() -> None:
    columns = {"income": 0.31, "age": 0.02, "zip": 0.12}
    counts = summary(columns, "counts", scores=0.05)
    assert (counts.columns, counts.watch, counts.shift) == (3, 1, 1)
    assert not counts.shared and counts.scores.level == "stable"
    opaque = summary(columns, "columns")
    assert [(c.column, c.level) for c in opaque.shared] == [
        ("c1", "shift"),
        ("c2", "stable"),
        ("c3", "watch"),
    ]
    assert not opaque.HasField("scores")
    named = summary(columns, "names")
    assert [c.column for c in named.shared] == ["income", "age", "zip"]
