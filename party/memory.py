"""The resident memory of a party daemon's process tree (it and its worker processes),
which the guard of its limits samples (`party.guard`).

`tree_bytes` finds a process's descendants and adds up their memory. `ProcessTree` is
what the guard samples every 0.2 s: it finds the descendants again only every
`rescan_s` and reads the memory of those it knows at every sample, so a sample costs a
few reads of /proc whatever the daemon runs. Descendants are found by each process's
parent (/proc/N/stat, as `ps` does): a walk of the processes of this machine (of the
daemon's container), not of the daemon's threads, of which a daemon serving online
scoring holds a thousand (`party.server`).
"""

from __future__ import annotations

import os
import time

RESCAN_S = 2.0  # how often `ProcessTree` looks for new descendants


def tree_bytes(pid: int | None = None) -> int:
    """The resident memory of process `pid` (default: this one) and its descendants."""
    root = os.getpid() if pid is None else pid
    return sum(rss(p) for p in (root, *descendants(root)))


def rss(pid: int) -> int:
    """The resident bytes of process `pid` (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def descendants(root: int) -> list[int]:
    """The processes below `root`: its children, theirs, and so on."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            parent = _parent(int(name))
            if parent is not None:
                children.setdefault(parent, []).append(int(name))
    found, todo = [], list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, ())
    return found


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
        return int(stat[stat.rindex(")") + 2 :].split()[1])  # after the name: state, ppid
    except (OSError, ValueError, IndexError):
        return None  # ended meanwhile


class ProcessTree:
    """Samples the resident memory of process `pid` (default: this one) and of its
    descendants, found again every `rescan_s` (a worker started meanwhile counts from the
    next search). Not thread-safe: one watchdog samples it."""

    def __init__(self, pid: int | None = None, rescan_s: float = RESCAN_S) -> None:
        self.root = os.getpid() if pid is None else pid
        self.rescan_s = rescan_s
        self._below: list[int] = []
        self._next_scan = 0.0

    def __call__(self) -> int:
        now = time.monotonic()
        if now >= self._next_scan:
            self._below, self._next_scan = descendants(self.root), now + self.rescan_s
        return sum(rss(p) for p in (self.root, *self._below))
