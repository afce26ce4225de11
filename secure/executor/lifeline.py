"""Child processes that end with their parent, even when it is killed by SIGKILL.

A party daemon's helper processes (its executor's worker pool, a PSI blinder's pool, the
obfuscator helpers) are "spawn" processes. A daemon killed by SIGKILL runs no clean-up,
so each child watches its parent itself: `watch_parent(pid)`, the initializer of a
process pool or the first call of a helper's target, starts a daemon thread that checks
every `WATCH_S` seconds whether `pid` is still its parent (a child whose parent died is
handed to init or a subreaper, so `os.getppid()` changes) and ends the child with SIGKILL
once it is not. A child whose parent died before the watch started ends at once.

The multiprocessing resource tracker, which the daemon's spawn children share with it,
needs nothing of its own: it ends when the last process holding its pipe has ended (the
daemon and these children), and first unlinks the shared memory they left behind, so a
restarted daemon finds neither processes nor segments of the one that died.

Linux's PR_SET_PDEATHSIG is not used: the kernel sends it when the *thread* that started
the child ends, and a process pool starts its workers from whichever thread submits to it
(a job's), so workers would die with the job that first used them.
"""

from __future__ import annotations

import os
import signal
import threading
import time

WATCH_S = 0.5  # how often a child checks that its parent is alive


def watch_parent(parent_pid: int, every_s: float = WATCH_S) -> None:
    """In a child process: end it (SIGKILL) once `parent_pid` is no longer its parent."""
    if os.getppid() != parent_pid:
        _end()
    thread = threading.Thread(
        target=_watch, args=(parent_pid, every_s), name="parent-watch", daemon=True
    )
    thread.start()


def _watch(parent_pid: int, every_s: float) -> None:
    while os.getppid() == parent_pid:
        time.sleep(every_s)
    _end()


def _end() -> None:
    """End this process now, without clean-up (its parent is gone: nobody waits for it)."""
    kill = getattr(signal, "SIGKILL", None)
    if kill is not None:
        os.kill(os.getpid(), kill)
    os._exit(1)
