"""Importing a `bench/` module in tests (`bench.NAME`, as `python -m bench.NAME` runs it)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from types import ModuleType


def bench_module(name: str) -> Iterator[ModuleType]:
    """Module `bench.<name>`, for a fixture to yield."""
    yield importlib.import_module(f"bench.{name}")
