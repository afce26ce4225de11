"""bench/raw_tables.py without running jobs: the smallest job spec, each row's `data:`
(`preprocess:` as the row says), the breast and criteo splits as written (raw cells kept,
hand-standardised columns z-scored, strings as codes declared categorical), and the
reason a failed `vfl run` shows."""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np
import pytest

from tests.support.bench import bench_module


@pytest.fixture(scope="module")
def raw_tables():
    yield from bench_module("raw_tables")


def _read(path: str) -> tuple[list[str], list[list[str]]]:
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    return rows[0], rows[1:]


def _args(**given) -> argparse.Namespace:
    return argparse.Namespace(**{"epochs": 1, "key_bits": 2048, **given})


def test_the_smallest_spec(raw_tables) -> None:
    data = {"bank": {"path": "b.csv"}, "shop": {"path": "s.csv"}}
    spec = raw_tables.job_spec("j", "blindfl", data, 7, _args())
    assert set(spec) == {"job", "protocol", "parties", "train"}
    assert spec["train"] == {"epochs": 1, "seed": 7}
    assert [p["role"] for p in spec["parties"]] == ["active", "passive"]
    test_keys = raw_tables.job_spec("j", "blindfl", data, 7, _args(key_bits=1024))
    assert test_keys["crypto"] == {"key_bits": 1024, "allow_insecure_test_keys": True}
    assert "crypto" not in raw_tables.job_spec("j", "split", data, 7, _args(key_bits=1024))


def test_each_row_sets_preprocess_as_it_says(raw_tables) -> None:
    source = raw_tables.TableSource(path="b.csv", label="y", categorical=("C1",))
    by_case = {c: raw_tables._data(source, raw_tables._preprocess(c)) for c in raw_tables.CASES}
    none = {"preprocess": "none"} if raw_tables.HAS_PREPROCESS else {}
    base = {"path": "b.csv", "id": "id", "label": "y", "categorical": ["C1"]}
    assert by_case["standardised"] == {**base, **none}
    assert by_case["raw"] == by_case["messy"] == base  # the defaults: no column settings
    assert by_case["zscore"] == {**base, "preprocess": "zscore"}
    assert raw_tables.cases("synthetic")[-1] == "messy"
    assert "messy" not in raw_tables.cases("breast") + raw_tables.cases("criteo")


def test_breast_split(raw_tables, tmp_path: Path) -> None:
    (tmp_path / "raw").mkdir()
    (tmp_path / "hand").mkdir()
    raw = raw_tables.breast_tables(tmp_path / "raw", "raw")
    hand = raw_tables.breast_tables(tmp_path / "hand", "standardised")
    header, rows = _read(raw["bank"].path)
    shop_header, shop_rows = _read(raw["shop"].path)
    assert header[:3] == ["id", "y", "mean_radius"] and len(header) == 17
    assert shop_header[0] == "id" and len(shop_header) == 16 and len(shop_rows) == 569
    assert rows[0][2] == "17.99" and raw["bank"].label == "y" and raw["shop"].label is None
    _, hand_rows = _read(hand["shop"].path)
    x = np.array([[float(c) for c in r[1:]] for r in hand_rows])
    np.testing.assert_allclose(x.mean(axis=0), 0, atol=1e-5)
    np.testing.assert_allclose(x.std(axis=0), 1, atol=1e-4)


def test_criteo_split(raw_tables, tmp_path: Path) -> None:
    if not raw_tables.CRITEO.exists():
        pytest.skip(f"{raw_tables.CRITEO} is missing")
    (tmp_path / "raw").mkdir()
    (tmp_path / "hand").mkdir()
    raw = raw_tables.criteo_tables(tmp_path / "raw", "raw")
    hand = raw_tables.criteo_tables(tmp_path / "hand", "standardised")
    bank, rows = _read(raw["bank"].path)
    shop, _ = _read(raw["shop"].path)
    assert bank == [
        "id",
        "label",
        *(f"I{i}" for i in range(1, 8)),
        *(f"C{i}" for i in range(1, 14)),
    ]
    assert shop == ["id", *(f"I{i}" for i in range(8, 14)), *(f"C{i}" for i in range(14, 27))]
    assert len(rows) == 200 and any(c == "" for r in rows for c in r)  # raw: empty cells kept
    assert raw["bank"].categorical == () and raw["bank"].label == "label"
    assert hand["shop"].categorical == tuple(f"C{i}" for i in range(14, 27))
    _, hand_rows = _read(hand["shop"].path)
    assert not any(c == "" for r in hand_rows for c in r)
    codes = np.array([[int(c) for c in r[7:]] for r in hand_rows])  # C14..C26 as codes
    assert codes.min() == 0 and codes.max() > 50


def test_a_failed_run_shows_what_failed(raw_tables) -> None:
    stderr = (
        "vfl run failed:\n"
        "party-shop: 2026-11-26 21:44:46,397 WARNING [job b-raw-0-66] vfl.party.daemon: "
        "party shop: failed: a value does not fit a signed 41-bit slot\n"
        "party-shop: 2026-11-26 21:44:47,001 WARNING [job -] vfl.party.report_sender: job "
        "b-raw-0-66: final report 'failed' was not delivered to the coordinator\n"
    )
    assert (
        raw_tables._reason(stderr)
        == "party shop: failed: a value does not fit a signed 41-bit slot"
    )
    assert raw_tables._reason("vfl run failed:\nspec: unknown field") == "spec: unknown field"
