"""A party's recorded view (`party.state.views`): files only its user reads, arrays back
as written, big decrypted integers as floats that keep their ratios."""

from __future__ import annotations

import stat
from pathlib import Path

import numpy as np
from vfl.party.state.views import ViewFiles, ints_as_floats, read_view
from vfl.party.training.context import NoView


def test_a_view_is_written_as_recorded_and_read_back(tmp_path: Path) -> None:
    view = ViewFiles(tmp_path / "views" / "job-1")
    view.record("own", {"ids": np.array(["a", 7], dtype=object), "labels": None})
    view.record("train/r12", {"rows": np.arange(3), "grad": np.ones((3, 2), np.float32)})
    view.decrypted("src/rows/train", [[2**700, -(2**699)], [0, 2**698]])
    records = read_view(tmp_path / "views" / "job-1")
    assert sorted(records) == ["dec_src_rows_train", "own", "train_r12"]
    assert list(records["own"]["ids"]) == ["a", "7"] and "labels" not in records["own"]
    assert np.array_equal(records["train_r12"]["rows"], np.arange(3))
    values = records["dec_src_rows_train"]["values"]
    assert values[0, 0] / values[0, 1] == -2 and values[0, 0] / values[1, 1] == 4
    for path in (tmp_path / "views" / "job-1").iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "views" / "job-1").stat().st_mode) == 0o700


def test_small_integers_stay_exact_and_production_records_nothing() -> None:
    assert np.array_equal(ints_as_floats([[1, -3], [5, 0]]), [[1, -3], [5, 0]])
    view = NoView()
    assert not view.recording
    assert view.record("own", {"x": np.ones(2)}) is None
