"""Process trees of a benchmark's daemons, read from Linux /proc: their processes and
threads, the CPU seconds they used, and pinning each party daemon to a core.

Used by bench/secure_epoch.py (`Pinner`, its "pinned" mode) and bench/predict.py
(`tree_cpu_seconds`, the parties' CPU seconds).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from floor import cores


def children(pid: int) -> list[int]:
    """The living children of process `pid` (a child belongs to the thread that started
    it, so every thread's `children` list is read: a pool started by a job thread is not
    the main thread's); [] once the process is gone."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return []
    found: list[int] = []
    for task in tasks:
        try:
            found.extend(int(c) for c in (task / "children").read_text().split())
        except OSError:  # the thread ended meanwhile
            continue
    return found


def descendants(pid: int) -> list[int]:
    """Process `pid` and every living process under it."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children(p))
    return out


def threads(pid: int) -> list[int]:
    """The thread ids of process `pid`; [] once it is gone."""
    try:
        return [int(t.name) for t in Path(f"/proc/{pid}/task").iterdir()]
    except OSError:
        return []


def tree_cpu_seconds(pid: int) -> float:
    """User + system seconds of a process, its reaped children and its living descendants
    (0 where a process is gone)."""
    total = 0.0
    for p in descendants(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    return total


def party_daemons() -> dict[int, int]:
    """pid -> core of this process's party daemons ("party-bank" core 0, the other 1)."""
    out = {}
    for pid in descendants(os.getpid()):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if " party serve " in cmd:
            out[pid] = 0 if "party-bank" in cmd else 1 % cores()
    return out


class Pinner:
    """Pins each party daemon and every process and thread under it to one core, again
    every 0.2 s (worker processes and threads start during the job)."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(0.2):
            for pid, core in party_daemons().items():
                for proc in descendants(pid):
                    for tid in threads(proc):
                        try:
                            os.sched_setaffinity(tid, {core})
                        except OSError:
                            pass

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
