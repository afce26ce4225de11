"""A daemon's process tree, read from Linux /proc: the processes under it, and which of
them are still alive (a process whose parent died is handed to init, but keeps its
session: `Daemons` starts each daemon in a session of its own)."""

from __future__ import annotations

import os
import time
from pathlib import Path


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name; None if it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not reaped, does not)."""
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"


def tree(pid: int) -> set[int]:
    """Process `pid` and every living process under it."""
    parents: dict[int, list[int]] = {}
    for p in _pids():
        fields = _stat(p)
        if fields is not None and fields[0] != "Z":
            parents.setdefault(int(fields[1]), []).append(p)
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        found.add(p)
        todo.extend(parents.get(p, []))
    return found


def in_session(sid: int) -> set[int]:
    """The living processes of session `sid` (fields: state, ppid, pgrp, session)."""
    return {p for p in _pids() if (f := _stat(p)) is not None and f[0] != "Z" and int(f[3]) == sid}


def wait_gone(pids: set[int], timeout: float) -> set[int]:
    """Wait up to `timeout` seconds for every process of `pids` to end; those still alive."""
    deadline = time.monotonic() + timeout
    while (left := {p for p in pids if alive(p)}) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def describe(pids: set[int]) -> str:
    """Each process's pid and command line, for a failure message."""
    lines = []
    for p in sorted(pids):
        try:
            cmd = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
        except OSError:
            cmd = "(gone)"
        lines.append(f"{p}: {cmd}")
    return "\n".join(lines)
