"""Faults of a party's disk and data for tests and bench/chaos.py: a small tmpfs (root
only), a disk filled to the last byte, and a table whose values change under the same
ids."""

from __future__ import annotations

import errno
import subprocess
from pathlib import Path


def mount_tmpfs(folder: Path, size: str = "4m") -> str | None:
    """Mount a tmpfs of `size` at `folder` (made if absent); None once mounted, else why
    not (mounting needs root)."""
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    return None if done.returncode == 0 else done.stderr.strip() or "mount failed"


def unmount(folder: Path) -> None:
    subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(folder: Path) -> Path:
    """A file in `folder` written until its disk is full; returns it (delete it for room).

    Raises:
        OSError: a write failed for another reason than a full disk.
    """
    filler = folder / "filler"
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
    return filler


def scaled(table: str) -> str:
    """A CSV table's text with its first feature column (after the id) times 1000: the
    same ids, other values."""
    lines = table.splitlines()
    cells = [row.split(",") for row in lines[1:]]
    rows = [",".join([c[0], str(float(c[1]) * 1000), *c[2:]]) for c in cells]
    return "\n".join([lines[0], *rows]) + "\n"
