"""Daemons as separate processes, started as `vfl` starts them (`vfl.local.daemon.Daemon`),
that a test can kill -9 and start again (with the same config, state directory and job
database)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import yaml
from vfl.coordinator.client import CoordinatorClient, JobView
from vfl.coordinator.errors import CoordinatorError
from vfl.local.daemon import VFL, Daemon, stop_all


class Daemons:
    """A coordinator and party daemons in `workdir`, each a `vfl ... serve` process."""

    def __init__(
        self,
        workdir: Path,
        grace_s: float = 2.0,
        auto_resume: bool = False,
        coordinator_args: tuple[str, ...] = (),
    ) -> None:
        self.workdir, self.grace_s, self.auto_resume = workdir, grace_s, auto_resume
        self.coordinator_args = coordinator_args  # more flags of `vfl coordinator serve`
        self.daemons: dict[str, Daemon] = {}
        self.procs: dict[str, subprocess.Popen] = {}  # each daemon's current process
        self.address = ""

    def start_coordinator(self, port: int = 0) -> str:
        args = ["coordinator", "serve", "--db", str(self.workdir / "jobs.sqlite")]
        args += ["--listen", f"127.0.0.1:{port}", "--party-grace", str(self.grace_s)]
        args += ["--auto-resume"] if self.auto_resume else []
        args += self.coordinator_args
        self.address = f"127.0.0.1:{self._spawn('coordinator', args)}"
        return self.address

    def start_party(
        self,
        party_id: str,
        datasets: dict[str, dict],
        audit: Path | None = None,
        flags: tuple[str, ...] = (),
    ) -> int:
        """`vfl party serve` (with `--audit DIR`: the wire audit of every envelope), with
        more `flags` of it."""
        config = self.workdir / f"{party_id}.yaml"
        if not config.exists():
            body = {"party": party_id, "coordinator": self.address, "datasets": datasets}
            config.write_text(yaml.safe_dump(body))
        args = ["party", "serve", "--config", str(config)]
        args += ["--audit", str(audit)] if audit else []
        return self._spawn(party_id, args + list(flags))

    def kill(self, name: str) -> None:
        """kill -9: no clean-up, no goodbye."""
        self.procs.pop(name)
        self.daemons.pop(name).kill()

    def client(self) -> CoordinatorClient:
        return CoordinatorClient(self.address)

    def vfl(self, *args: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "VFL_COORDINATOR": self.address}
        return subprocess.run([*VFL, *args], capture_output=True, text=True, timeout=120, env=env)

    def wait(self, job_id: str, until, timeout: float = 180.0) -> JobView:
        """Poll the job until `until(view)` holds."""
        deadline = time.monotonic() + timeout
        with self.client() as client:
            while time.monotonic() < deadline:
                view = client.get(job_id)
                if until(view):
                    return view
                time.sleep(0.05)
        raise AssertionError(f"job {job_id} is still {view.state} ({view.reason})\n{self.logs()}")

    def kill_and_resume(
        self, job_id: str, party: str, datasets: dict[str, dict], audit: Path | None = None
    ) -> JobView:
        """Once the job has a checkpoint of round 8: kill -9 `party`, start it again (with
        `datasets`), see the job PAUSED, `vfl resume` it and wait for SUCCEEDED; its view."""
        self.wait(job_id, lambda v: v.result.checkpoint_round >= 8)
        self.kill(party)
        self.start_party(party, datasets, audit)
        view = self.wait(job_id, lambda v: v.state in ("PAUSED", "SUCCEEDED", "FAILED"))
        assert view.state == "PAUSED", view.reason
        out = self.vfl("resume", job_id)
        assert out.returncode == 0, out.stderr
        assert "continuing after round" in out.stderr
        view = self.wait(job_id, lambda v: v.state in ("SUCCEEDED", "FAILED"))
        assert view.state == "SUCCEEDED", view.reason + self.logs()
        return view

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n" + "\n".join(p.read_text().splitlines()[-20:])
            for p in sorted(self.workdir.glob("*.log"))
        )

    def stop(self) -> None:
        stop_all(self.daemons.values())
        self.daemons.clear()
        self.procs.clear()

    def _spawn(self, name: str, args: list[str]) -> int:
        daemon = self.daemons[name] = Daemon(name, args, self.workdir, fresh_log=False)
        daemon.spawn()
        assert daemon.proc is not None
        self.procs[name] = daemon.proc
        try:
            return daemon.wait_serving()
        except CoordinatorError as exc:
            raise AssertionError(f"{exc}\n{self.logs()}") from None
