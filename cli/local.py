"""`vfl run` / `vfl demo`: a coordinator and every party of a spec as local processes.

Each process binds port 0 and writes its bound port to a file once it is serving (and,
for parties, registered), so nothing races for ports. Children watch the launcher's pid
and stop if it disappears; on Ctrl-C the launcher cancels the job and stops them.
With `tls` (the default) the run gets its own federation CA in `<workdir>/tls` and every
process (coordinator, parties, and this launcher as `admin`) uses mutual TLS. A run
without a workdir removes its temporary folder, CA key included, when it ends.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml
from vfl.contract.spec import DataSpec, JobSpec, TableSource
from vfl.coordinator.client import CoordinatorClient, JobView
from vfl.coordinator.errors import CoordinatorError
from vfl.proto.rpc import COORDINATOR_ID
from vfl.secure.pki.federation import ADMIN_ID, load_identity, local_federation

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
        self.workdir = workdir
        self.party_args, self.coordinator_args = party_args, coordinator_args
        self.tls_args = ("--tls", str(tls_dir)) if tls_dir else ()
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
        files = {}
        for p in spec.parties:
            config = self.workdir / f"party-{p.id}.yaml"
            config.write_text(yaml.safe_dump(_party_config(p.id, p.data, self.coordinator_address)))
            files[p.id] = self._spawn(
                f"party-{p.id}",
                ["party", "serve", "--config", str(config), *self.tls_args, *self.party_args],
            )
            test = "test" if p.data.test_path else None
            spec = spec.with_data(p.id, DataSpec(dataset="data", test_dataset=test))
        for p in spec.parties:
            self._wait_port(f"party-{p.id}", files[p.id])
        return spec

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


def _party_config(party_id: str, data: DataSpec, coordinator: str) -> dict:
    """A party config exposing the files `data` names as datasets `data` (and `test`)."""
    datasets = {"data": _dataset(data.table())}
    if data.test_path:
        datasets["test"] = _dataset(data.table(test=True))
    return {
        "party": party_id,
        "listen": "127.0.0.1:0",
        "coordinator": coordinator,
        "datasets": datasets,
    }


def _dataset(source: TableSource) -> dict:
    return source.model_dump(mode="json", exclude_none=True)


def spec_to_yaml(spec: JobSpec) -> str:
    raw = spec.model_dump(mode="json")
    for p in raw["parties"]:
        p["data"] = {k: v for k, v in p["data"].items() if v is not None}
    return yaml.safe_dump(raw, sort_keys=False)


@dataclass
class LocalRun:
    """A started local topology: its folder, processes, the run's admin client and the
    spec rewritten to the parties' datasets (what to submit)."""

    base: Path
    topology: LocalTopology
    client: CoordinatorClient
    spec: JobSpec
    tls_dir: Path | None

    def submit(self, spec: JobSpec | None = None) -> str:
        """Submit `spec` (default: the run's own), rewritten to the parties' datasets."""
        local = self.spec if spec is None else _as_local(spec, self.spec)
        return self.client.submit(spec_to_yaml(local))


def _as_local(spec: JobSpec, local: JobSpec) -> JobSpec:
    """`spec` with the data of the parties as `local` (the started run's spec) names it."""
    for p in local.parties:
        spec = spec.with_data(p.id, p.data)
    return spec


@contextmanager
def started(
    spec: JobSpec,
    workdir: str | Path | None = None,
    party_args: tuple[str, ...] = (),
    *,
    tls: bool = True,
    went_well: Callable[[], bool] = lambda: False,
    coordinator_args: tuple[str, ...] = (),
) -> Iterator[LocalRun]:
    """A fresh local topology for `spec`'s parties, stopped when the block ends.

    With `tls`, a fresh CA and certificates for every process go to `<workdir>/tls`.
    Without `workdir` the run gets a temporary folder, removed when the block ends however
    it ends (its CA's private key with it); unless `went_well()` says so
    (or the user interrupted it), the warnings and errors of its logs are printed on
    stderr first. `party_args` and `coordinator_args` go to the daemons' command lines.
    """
    base = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="vfl-run-"))
    show_logs = not workdir
    try:
        base.mkdir(parents=True, exist_ok=True)
        tls_dir = None
        if tls:
            ids = [COORDINATOR_ID, ADMIN_ID, *(p.id for p in spec.parties)]
            tls_dir = local_federation(base / "tls", ids)
        topology = LocalTopology(base, party_args, tls_dir, coordinator_args)
        client = None
        try:
            local_spec = topology.start(spec)
            admin = load_identity(tls_dir, ADMIN_ID) if tls_dir else None
            client = CoordinatorClient(topology.coordinator_address, admin)
            yield LocalRun(base, topology, client, local_spec, tls_dir)
            show_logs = show_logs and not went_well()
        finally:
            topology.stop()  # first: whatever closing the client does, no process is left
            if client is not None:
                client.close()
    except KeyboardInterrupt:
        show_logs = False  # the user stopped the run
        raise
    finally:
        if not workdir:
            if show_logs:
                _print_problems(base)
            shutil.rmtree(base, ignore_errors=True)


def run_local(
    spec: JobSpec,
    watch,
    workdir: str | None = None,
    party_args: tuple[str, ...] = (),
    *,
    tls: bool = True,
) -> JobView:
    """Run one job on a fresh local topology (`started`); `watch(client, job_id)` follows
    it. On Ctrl-C the job is cancelled and every process stopped."""
    views: list[JobView] = []
    succeeded = lambda: bool(views) and views[0].state == "SUCCEEDED"  # noqa: E731
    with started(spec, workdir, party_args, tls=tls, went_well=succeeded) as run:
        job_id = run.submit()
        views.append(follow_or_cancel(run.client, job_id, watch))
    return views[0]


def follow_or_cancel(client: CoordinatorClient, job_id: str, watch) -> JobView:
    """`watch(client, job_id)`; on Ctrl-C cancel the job first (best effort)."""
    try:
        return watch(client, job_id)
    except KeyboardInterrupt:
        try:
            client.cancel(job_id)
        except Exception:  # noqa: BLE001 - best effort while shutting down
            pass
        raise


def _print_problems(base: Path) -> None:
    """The warnings and errors of a run's logs, on stderr (before they are removed)."""
    lines = [
        f"  {log.stem}: {line}"
        for log in sorted(base.glob("*.log"))
        for line in log.read_text(errors="replace").splitlines()
        if " WARNING " in line or " ERROR " in line
    ]
    if lines:
        print("warnings and errors in the run's logs:", *lines, sep="\n", file=sys.stderr)
