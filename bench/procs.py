"""Process trees of a benchmark's daemons, read from Linux /proc: their processes and
threads, the CPU seconds they used, and pinning each party daemon to a core.

Used by bench/secure_epoch.py (`Pinner`, its "pinned" mode), bench/predict.py
(`tree_cpu_seconds`, the parties' CPU seconds), bench/scale_rows.py, bench/soak.py and
bench/kill_resume.py (`members`: a daemon's processes, to see which of a killed daemon's
live on, and their memory).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from vfl.local import Daemon

from bench.floor import cores

PAGE = os.sysconf("SC_PAGE_SIZE")


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
        fields = stat_fields(p)
        if fields is not None:
            total += sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    return total


def stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (state first); None if gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def alive(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie."""
    fields = stat_fields(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def session_members(sid: int) -> list[int]:
    """The living processes of session `sid` (a daemon started with its own session is
    its session's leader: its sid is its pid, and the workers it starts keep it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = stat_fields(int(entry.name))
        if fields is not None and fields[0] not in ("Z", "X") and int(fields[3]) == sid:
            found.append(int(entry.name))
    return found


def members(daemon: Daemon) -> list[int]:
    """A running daemon's processes: those under it and those of its session (workers it
    started keep its session); none once it ended."""
    if daemon.exited() is not None:
        return []
    return sorted(set(descendants(daemon.pid)) | set(session_members(daemon.pid)))


def killed(daemon: Daemon) -> list[int]:
    """kill -9 the daemon alone (as a crash or the OOM killer would); returns its
    processes just before."""
    before = members(daemon)
    daemon.kill()
    return before


def rss_bytes(pids: list[int]) -> int:
    """Resident memory of `pids` together (0 for those gone)."""
    total = 0
    for pid in pids:
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
        except (OSError, IndexError, ValueError):
            continue
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
