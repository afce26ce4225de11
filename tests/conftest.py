"""Shared fixtures: dataset paths and a local topology of real gRPC daemons on port 0."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent
FATE = REPO / "coordinator" / "cli" / "data"
DATA = REPO / "tests" / "data"


def shared_data(*parts: str) -> Path:
    """A data file copied into tests/data (see its README for sources and licences)."""
    path = DATA.joinpath(*parts)
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: restore tests/data from git")
    return path


def assert_close(actual, expected, rel: float = 1e-4, atol: float = 1e-8) -> None:
    """The one numeric comparison helper: relative error against the expected scale."""
    a, e = np.asarray(actual, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    assert a.shape == e.shape, f"shape {a.shape} != {e.shape}"
    scale = max(float(np.max(np.abs(e))) if e.size else 0.0, atol)
    err = float(np.max(np.abs(a - e))) if a.size else 0.0
    assert err <= rel * scale, f"max abs error {err:.3g} > {rel:g} x scale {scale:.3g}"


@pytest.fixture
def breast_files(tmp_path: Path) -> tuple[Path, Path]:
    guest, host = tmp_path / "guest.csv", tmp_path / "host.csv"
    shutil.copy(FATE / "breast_hetero_guest.csv", guest)
    shutil.copy(FATE / "breast_hetero_host.csv", host)
    return guest, host
