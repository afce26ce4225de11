"""Fixtures every test tier may use; shared helpers live in `tests.support`."""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.data import FATE
from tests.support.postgres import Postgres, start_postgres


@pytest.fixture
def breast_files(tmp_path: Path) -> tuple[Path, Path]:
    guest, host = tmp_path / "guest.csv", tmp_path / "host.csv"
    shutil.copy(FATE / "breast_hetero_guest.csv", guest)
    shutil.copy(FATE / "breast_hetero_host.csv", host)
    return guest, host


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """A throwaway PostgreSQL server for the session (`tests.support.postgres`); the tests
    using it skip, saying why, where the driver or the server binaries are missing."""
    if importlib.util.find_spec("psycopg") is None:
        pytest.skip('psycopg is not installed: pip install -e ".[sql]"')
    server = start_postgres()
    if isinstance(server, str):
        pytest.skip(f"no PostgreSQL server can start: {server}")
    yield server
    server.stop()
