"""The processes of a local federation (`vfl run`, `vfl demo`, `vfl.local_federation`): a
coordinator and party daemons, each a `vfl ... serve` child of this process.

Each process binds port 0 and writes its bound port to a file once it is serving (and,
for parties, registered), so nothing races for ports. Children watch the launcher's pid
and stop if it disappears. A party's config exposes its tables as named datasets; for a
spec given with files (`vfl run`), each party's files become its datasets `data` and
`test` (`spec_datasets`, `as_datasets`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import yaml
from vfl.contract.spec import DataSpec, JobSpec, TableSource
from vfl.coordinator.errors import CoordinatorError

STARTUP_TIMEOUT_S = 60.0


class LocalTopology:
    """Starts and stops the processes of one local run."""

    def __init__(
        self,
        workdir: Path,
        party_args: tuple[str, ...] = (),
        tls_dir: Path | None = None,
        coordinator_args: tuple[str, ...] = (),
    ) -> None:
        # absolute: the daemons run in `workdir`, where a relative path would name
        # `workdir/workdir/...` ("wd/tls/ca.crt is missing")
        self.workdir = Path(workdir).resolve()
        self.party_args, self.coordinator_args = party_args, coordinator_args
        self.tls_args = ("--tls", str(Path(tls_dir).resolve())) if tls_dir else ()
        self.procs: list[tuple[str, subprocess.Popen]] = []
        self.coordinator_address = ""

    def _spawn(self, name: str, args: list[str]) -> Path:
        port_file = self.workdir / f"{name}.port"
        log = open(self.workdir / f"{name}.log", "w")  # noqa: SIM115 - closed with process
        cmd = [
            sys.executable,
            "-m",
            "vfl.cli.main",
            *args,
            "--port-file",
            str(port_file),
            "--parent-pid",
            str(os.getpid()),
        ]
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=self.workdir
        )
        self.procs.append((name, proc))
        with open(self.workdir / "pids", "a") as fh:
            fh.write(f"{proc.pid}\n")
        return port_file

    def _wait_port(self, name: str, port_file: Path) -> int:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        proc = dict(self.procs)[name]
        while time.monotonic() < deadline:
            if port_file.exists() and port_file.read_text().strip():
                return int(port_file.read_text())
            if proc.poll() is not None:
                raise CoordinatorError(f"{name} exited during startup:\n{self.log_tail(name)}")
            time.sleep(0.05)
        raise CoordinatorError(
            f"{name} did not start within {STARTUP_TIMEOUT_S:.0f} s:\n{self.log_tail(name)}"
        )

    def log_tail(self, name: str, lines: int = 15) -> str:
        path = self.workdir / f"{name}.log"
        text = path.read_text() if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def start(self, spec: JobSpec) -> JobSpec:
        """Start the coordinator and the parties; return the spec rewritten to datasets."""
        self.start_coordinator()
        self.start_parties(spec_datasets(spec))
        return as_datasets(spec)

    def start_coordinator(self) -> str:
        """Start the coordinator; returns its address once it serves."""
        pf = self._spawn(
            "coordinator",
            [
                "coordinator",
                "serve",
                "--db",
                str(self.workdir / "jobs.sqlite"),
                "--listen",
                "127.0.0.1:0",
                *self.tls_args,
                *self.coordinator_args,
            ],
        )
        self.coordinator_address = f"127.0.0.1:{self._wait_port('coordinator', pf)}"
        return self.coordinator_address

    def start_parties(self, datasets: Mapping[str, Mapping[str, TableSource]]) -> None:
        """Start a party per id of `datasets`, exposing its datasets (name -> table), and
        wait until each has registered with the coordinator."""
        files = {}
        for party_id, tables in datasets.items():
            config = self.workdir / f"party-{party_id}.yaml"
            body = _party_config(party_id, tables, self.coordinator_address)
            config.write_text(yaml.safe_dump(body))
            files[party_id] = self._spawn(
                f"party-{party_id}",
                ["party", "serve", "--config", str(config), *self.tls_args, *self.party_args],
            )
        for party_id, port_file in files.items():
            self._wait_port(f"party-{party_id}", port_file)

    def stop(self) -> None:
        for _, proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        for _, proc in self.procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def spec_datasets(spec: JobSpec) -> dict[str, dict[str, TableSource]]:
    """Each party's files in `spec` as its datasets `data` (and `test`), as `vfl run`
    exposes them."""
    datasets = {}
    for p in spec.parties:
        tables = {"data": p.data.table()}
        if p.data.test_path:
            tables["test"] = p.data.table(test=True)
        datasets[p.id] = tables
    return datasets


def as_datasets(spec: JobSpec) -> JobSpec:
    """`spec` reading the datasets `spec_datasets` exposes instead of its files."""
    for p in spec.parties:
        test = "test" if p.data.test_path else None
        spec = spec.with_data(p.id, DataSpec(dataset="data", test_dataset=test))
    return spec


def _party_config(party_id: str, tables: Mapping[str, TableSource], coordinator: str) -> dict:
    """A party config exposing `tables` as its datasets."""
    return {
        "party": party_id,
        "listen": "127.0.0.1:0",
        "coordinator": coordinator,
        "datasets": {
            name: t.model_dump(mode="json", exclude_none=True) for name, t in tables.items()
        },
    }
