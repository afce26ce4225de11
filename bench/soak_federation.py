"""The federation of bench/soak.py: a coordinator and two party daemons, each a `vfl ...
serve` process started as `vfl run` starts them (a session of its own, mutual TLS with a
fresh federation CA, a port file, the bench's pid to watch), that the soak kills with
SIGKILL and starts again with the same config, state directory and job database.

What Linux /proc says of a daemon: the processes of its session (the daemon and every
worker process it started, which keep its session), their resident memory, and which of
them are still alive after the daemon was killed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml
from procs import descendants, session_members
from vfl.contract.spec import TableSource
from vfl.coordinator.client import CoordinatorClient
from vfl.rpc import COORDINATOR_ID
from vfl.secure.pki.federation import ADMIN_ID, load_identity, local_federation

VFL = [sys.executable, "-m", "vfl.cli.main"]
START_TIMEOUT_S = 120.0


class Daemon:
    """One `vfl ... serve` process, started again with the same arguments after a kill."""

    def __init__(self, name: str, args: list[str], workdir: Path) -> None:
        self.name, self.args, self.workdir = name, args, workdir
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.down_on_purpose = False  # killed by the soak: not an unplanned death

    @property
    def pid(self) -> int:
        return 0 if self.proc is None else self.proc.pid

    def start(self) -> int:
        """Start the process and wait until it serves; returns its port."""
        port_file = self.workdir / f"{self.name}.port"
        port_file.unlink(missing_ok=True)
        log = open(self.workdir / f"{self.name}.log", "a")  # noqa: SIM115 - the process owns it
        cmd = [*VFL, *self.args, "--port-file", str(port_file), "--parent-pid", str(os.getpid())]
        self.proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir, start_new_session=True
        )
        log.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if port_file.exists() and port_file.read_text().strip():
                self.port = int(port_file.read_text())
                self.down_on_purpose = False
                return self.port
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited at start:\n{self.log_tail()}")
            time.sleep(0.1)
        raise RuntimeError(f"{self.name} did not start in {START_TIMEOUT_S:.0f} s")

    def members(self) -> list[int]:
        """The daemon's processes: those under it and those of its session."""
        if self.proc is None or self.proc.poll() is not None:
            return []
        return sorted(set(descendants(self.pid)) | set(session_members(self.pid)))

    def kill(self) -> list[int]:
        """kill -9 the daemon (only the daemon, as the kernel's OOM killer or a crash
        would); returns its processes just before."""
        assert self.proc is not None
        members = self.members()
        self.down_on_purpose = True
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        return members

    def exited(self) -> int | None:
        """Its exit code if it ended, else None."""
        return None if self.proc is None else self.proc.poll()

    def stop(self) -> None:
        """SIGTERM, as an operator stops it; SIGKILL after 30 s."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.down_on_purpose = True
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def log_tail(self, lines: int = 20) -> str:
        path = self.workdir / f"{self.name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


class SoakFederation:
    """A coordinator and one party daemon per entry of `tables` (each exposing its table
    as dataset "data"), with mutual TLS; `client` is the operator's (identity admin)."""

    def __init__(self, workdir: Path, tables: dict[str, TableSource], grace_s: float) -> None:
        self.workdir = workdir
        self.tls = local_federation(workdir / "tls", [COORDINATOR_ID, ADMIN_ID, *tables])
        self.coordinator = Daemon(
            "coordinator",
            ["coordinator", "serve", "--db", str(workdir / "jobs.sqlite")]
            + ["--listen", "127.0.0.1:0", "--tls", str(self.tls)]
            + ["--party-grace", str(grace_s)],
            workdir,
        )
        self.tables = tables
        self.parties: dict[str, Daemon] = {}
        self.client: CoordinatorClient | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.coordinator.port}"

    def start(self) -> None:
        self.coordinator.start()
        for party, table in self.tables.items():
            config = self.workdir / f"party-{party}.yaml"
            body = {
                "party": party,
                "listen": "127.0.0.1:0",
                "coordinator": self.address,
                "datasets": {"data": table.model_dump(mode="json", exclude_none=True)},
            }
            config.write_text(yaml.safe_dump(body))
            args = ["party", "serve", "--config", str(config), "--tls", str(self.tls)]
            self.parties[party] = Daemon(f"party-{party}", args, self.workdir)
            self.parties[party].start()
        self.client = CoordinatorClient(self.address, load_identity(self.tls, ADMIN_ID))

    def party_address(self, party: str) -> str:
        """Where party `party` serves now (a restarted daemon binds a new port)."""
        return f"127.0.0.1:{self.parties[party].port}"

    def vfl(self, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
        """`vfl ARGS` as the operator (identity admin) against the coordinator."""
        flags = ["--coordinator", self.address, "--tls", str(self.tls), "--identity", ADMIN_ID]
        return subprocess.run(
            [*VFL, *args, *flags], capture_output=True, text=True, timeout=timeout
        )

    def stop(self) -> None:
        for daemon in [*self.parties.values(), self.coordinator]:
            daemon.stop()
        if self.client is not None:
            self.client.close()
