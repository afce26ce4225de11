"""Fixtures every test tier may use; shared helpers live in `tests.support`."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.data import FATE


@pytest.fixture
def breast_files(tmp_path: Path) -> tuple[Path, Path]:
    guest, host = tmp_path / "guest.csv", tmp_path / "host.csv"
    shutil.copy(FATE / "breast_hetero_guest.csv", guest)
    shutil.copy(FATE / "breast_hetero_host.csv", host)
    return guest, host
