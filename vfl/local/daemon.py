"""One daemon of a local federation: a `vfl ... serve` child process in a session of its
own, that binds port 0 and writes its bound port to `<workdir>/<name>.port` once it
serves. It can be stopped (SIGTERM), killed (SIGKILL: no clean-up, as a crash or the
kernel's OOM killer would) and started again with the same arguments, hence the same
config, state directory and job database.

Its output goes to `<workdir>/<name>.log` (a restart appends), and each process it starts
appends its pid to `<workdir>/pids`. With `watch_parent` the daemon watches this
process's pid and stops if it disappears.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from vfl.coordinator.errors import CoordinatorError

STARTUP_TIMEOUT_S = 60.0
VFL = (sys.executable, "-m", "vfl.cli.main")


class Daemon:
    """One `vfl ... serve` process (`args` after `vfl`), restartable."""

    def __init__(
        self,
        name: str,
        args: Sequence[str],
        workdir: Path,
        *,
        watch_parent: bool = True,
        fresh_log: bool = True,
        startup_timeout_s: float = STARTUP_TIMEOUT_S,
    ) -> None:
        self.name, self.args, self.workdir = name, list(args), Path(workdir)
        self.watch_parent, self.startup_timeout_s = watch_parent, startup_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.down_on_purpose = False  # stopped or killed here, not died on its own
        self._log_mode = "w" if fresh_log else "a"

    @property
    def pid(self) -> int:
        """The pid of its current (or last) process; 0 before the first start."""
        return 0 if self.proc is None else self.proc.pid

    @property
    def address(self) -> str:
        """Where it serves (a restart binds a new port unless its args name one)."""
        return f"127.0.0.1:{self.port}"

    @property
    def port_file(self) -> Path:
        return self.workdir / f"{self.name}.port"

    def start(self) -> int:
        """Start the process and wait until it serves; returns its port.

        Raises:
            CoordinatorError: it exited or did not serve in time (with its log's end).
        """
        self.spawn()
        return self.wait_serving()

    def spawn(self) -> None:
        """Start the process without waiting (`wait_serving` waits)."""
        self.port_file.unlink(missing_ok=True)
        parent = ("--parent-pid", str(os.getpid())) if self.watch_parent else ()
        cmd = [*VFL, *self.args, "--port-file", str(self.port_file), *parent]
        with open(self.workdir / f"{self.name}.log", self._log_mode) as log:
            self.proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir, start_new_session=True
            )
        self._log_mode = "a"  # a restart keeps what the killed process wrote
        self.down_on_purpose = False
        with open(self.workdir / "pids", "a") as fh:
            fh.write(f"{self.proc.pid}\n")

    def wait_serving(self) -> int:
        """Wait until the started process has written its port; returns it.

        Raises:
            CoordinatorError: it exited or did not serve in time (with its log's end).
        """
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            text = self.port_file.read_text().strip() if self.port_file.exists() else ""
            if text:
                self.port = int(text)
                return self.port
            if self.exited() is not None:
                raise CoordinatorError(f"{self.name} exited during startup:\n{self.log_tail()}")
            time.sleep(0.05)
        raise CoordinatorError(
            f"{self.name} did not start within {self.startup_timeout_s:.0f} s:\n{self.log_tail()}"
        )

    def exited(self) -> int | None:
        """Its exit code if its process ended (or never started), else None."""
        if self.proc is None:
            return 0
        return self.proc.poll()

    def died(self) -> int | None:
        """Its exit code if it ended without being stopped or killed here, else None."""
        code = self.exited()
        return None if self.down_on_purpose or self.proc is None else code

    def kill(self) -> None:
        """kill -9 the daemon's process only (its workers are left to notice)."""
        if self.proc is None:
            return
        self.down_on_purpose = True
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def terminate(self) -> None:
        """SIGTERM, as an operator stops it, without waiting."""
        if self.proc is not None and self.proc.poll() is None:
            self.down_on_purpose = True
            self.proc.send_signal(signal.SIGTERM)

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after `timeout_s`."""
        self.terminate()
        self.reap(time.monotonic() + timeout_s)

    def reap(self, deadline: float) -> None:
        """Wait for its process until `deadline` (time.monotonic()), then SIGKILL it."""
        if self.proc is None:
            return
        try:
            self.proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def log_tail(self, lines: int = 15) -> str:
        path = self.workdir / f"{self.name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def stop_all(daemons: Iterable[Daemon], timeout_s: float = 10.0) -> None:
    """SIGTERM to every daemon at once, then SIGKILL to those still running `timeout_s`
    later."""
    daemons = list(daemons)
    for daemon in daemons:
        daemon.terminate()
    deadline = time.monotonic() + timeout_s
    for daemon in daemons:
        daemon.reap(deadline)
