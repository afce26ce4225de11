"""A real Ray cluster on this machine for tests and bench/scale_out.py: one head and N
worker nodes, each started by `ray start` as its own set of processes (one CPU and a
small object store each), and stopped by killing exactly the processes it started.

`ray stop` would stop every Ray process of the user on the machine, so `stop()` instead
kills the processes whose command line names this cluster's temp dir or session (its GCS,
raylets, agents) and their children (the worker processes)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

RAY = Path(sys.executable).with_name("ray")
OBJECT_STORE = 100_000_000  # bytes per node


def ray_missing() -> str | None:
    """Why a Ray cluster cannot start here (None: it can try)."""
    try:
        import ray  # noqa: F401, PLC0415 - optional extra
    except ImportError:
        return 'Ray is not installed: pip install -e ".[ray]"'
    if not RAY.exists():
        return f"no `ray` command beside {sys.executable}"
    return None


class LocalRayCluster:
    """`ray start --head` plus `workers` x `ray start --address`, on 127.0.0.1."""

    def __init__(self, workers: int = 1, cpus: int = 1) -> None:
        self.workers, self.cpus = workers, cpus
        self.root = Path(tempfile.mkdtemp(prefix="vfl-ray-"))
        self.address = ""

    def start(self) -> str:
        """Start the nodes; returns the head's HOST:PORT.

        Raises:
            RuntimeError: a node did not start (with its output).
        """
        head = self._ray(
            "start", "--head", "--port", "0", "--temp-dir", str(self.root / "head"),
            "--include-dashboard", "false",
        )  # fmt: skip
        found = re.search(r"--address='([^']+)'", head)
        if found is None:
            raise RuntimeError(f"ray start --head printed no address:\n{head}")
        port = found.group(1).rsplit(":", 1)[1]
        self.address = f"127.0.0.1:{port}"
        for _ in range(self.workers):
            self._ray("start", "--address", self.address)
        return self.address

    def _ray(self, *args: str) -> str:
        cmd = [str(RAY), *args, "--node-ip-address", "127.0.0.1", "--num-cpus", str(self.cpus)]
        cmd += ["--object-store-memory", str(OBJECT_STORE), "--disable-usage-stats"]
        env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}")
        return done.stdout + done.stderr

    def node_pids(self) -> list[int]:
        """The processes of this cluster's nodes (not their workers)."""
        marks = [str(self.root)]
        session = self._session()
        if session:
            marks.append(session)
        # the head's client server names only the head's address (on the node's own IP)
        port = re.compile(rf"--address=\S+:{self.address.rsplit(':', 1)[-1]}\b")
        return [
            pid
            for pid, cmd in _processes()
            if any(m in cmd for m in marks) or (self.address and port.search(cmd))
        ]

    def worker_pids(self) -> list[int]:
        """The worker processes (`ray::IDLE`, `ray::<task>`) of this cluster's raylets, not
        their agents (`ray::DashboardAgent`...: a raylet dies with them, and so would the
        drivers of its cluster)."""
        nodes = set(self.node_pids())
        return [
            pid
            for pid, cmd in _processes()
            if cmd.startswith("ray::") and not cmd.endswith("Agent") and _ppid(pid) in nodes
        ]

    def kill_workers(self) -> int:
        """SIGKILL every worker process of the cluster now; returns how many."""
        pids = self.worker_pids()
        for pid in pids:
            _kill(pid)
        return len(pids)

    def stop(self) -> None:
        pids = self.node_pids()
        children = [pid for pid, _ in _processes() if _ppid(pid) in set(pids)]
        for pid in [*children, *pids]:
            _kill(pid)
        shutil.rmtree(self.root, ignore_errors=True)

    def _session(self) -> str:
        latest = self.root / "head" / "session_latest"
        return os.path.realpath(latest) if latest.exists() else ""


def _processes() -> list[tuple[int, str]]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                raw = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            out.append((int(entry), raw.replace(b"\0", b" ").decode(errors="replace").strip()))
    return out


def _ppid(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return -1
    return int(stat.rsplit(")", 1)[1].split()[1])


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
