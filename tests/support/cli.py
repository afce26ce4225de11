"""The `vfl` command as a subprocess, and the breast job it runs (tests/e2e/test_cli*.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.data import FATE
from tests.support.processes import VFL

REPO = Path(__file__).resolve().parents[2]

__all__ = ["REPO", "VFL", "vfl", "write_job"]


def vfl(*args: str, timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    """`vfl ARGS` from the repository, its output captured as text."""
    return subprocess.run(
        [*VFL, *args], capture_output=True, text=True, timeout=timeout, cwd=REPO, **kw
    )


def write_job(path: Path, epochs: int = 5) -> Path:
    """The breast job (bank active, shop passive, data by path) written to `path`."""
    path.write_text(f"""
job: breast
parties:
  - {{id: bank, role: active, data: {{path: {FATE}/breast_hetero_guest.csv, label: y}}}}
  - {{id: shop, role: passive, data: {{path: {FATE}/breast_hetero_host.csv}}}}
train: {{epochs: {epochs}, batch_size: 64}}
validation: {{every: 10}}
""")
    return path
