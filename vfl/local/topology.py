"""The processes of a local federation (`vfl run`, `vfl demo`, `vfl.local_federation`): a
coordinator and party daemons, each a `vfl ... serve` child of this process
(`vfl.local.daemon.Daemon`).

Each process binds port 0 and writes its bound port to a file once it is serving (and,
for parties, registered), so nothing races for ports. Children watch the launcher's pid
and stop if it disappears. One daemon can be killed with SIGKILL and started again with
the same config and state (`kill`, `restart`). A party's config exposes its tables as
named datasets; for a spec given with files (`vfl run`), each party's files become its
datasets `data` and `test` (`spec_datasets`, `as_datasets`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import yaml
from vfl.contract.spec import DataSpec, JobSpec, TableSource
from vfl.local.daemon import Daemon, stop_all

COORDINATOR = "coordinator"


class LocalTopology:
    """Starts and stops the processes of one local run (each a `Daemon`), and kills or
    restarts one of them (as the soak and the crash tests do)."""

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
        self.daemons: dict[str, Daemon] = {}  # by name: "coordinator", "party-<id>"
        self.coordinator_address = ""

    @property
    def parties(self) -> dict[str, Daemon]:
        """The party daemons by party id."""
        return {n.removeprefix("party-"): d for n, d in self.daemons.items() if n != COORDINATOR}

    def daemon(self, name: str) -> Daemon:
        """The daemon `name`: "coordinator", a party id, or "party-<id>"."""
        return self.daemons.get(name) or self.daemons[f"party-{name}"]

    def log_tail(self, name: str, lines: int = 15) -> str:
        return self.daemon(name).log_tail(lines)

    def start(self, spec: JobSpec) -> JobSpec:
        """Start the coordinator and the parties; return the spec rewritten to datasets."""
        self.start_coordinator()
        self.start_parties(spec_datasets(spec))
        return as_datasets(spec)

    def start_coordinator(self) -> str:
        """Start the coordinator; returns its address once it serves."""
        db = str(self.workdir / "jobs.sqlite")
        args = ["coordinator", "serve", "--db", db, "--listen", "127.0.0.1:0"]
        coordinator = self._add(COORDINATOR, [*args, *self.tls_args, *self.coordinator_args])
        coordinator.start()
        self.coordinator_address = coordinator.address
        return self.coordinator_address

    def start_parties(self, datasets: Mapping[str, Mapping[str, TableSource]]) -> None:
        """Start a party per id of `datasets`, exposing its datasets (name -> table), and
        wait until each has registered with the coordinator."""
        started = []
        for party_id, tables in datasets.items():
            config = self.workdir / f"party-{party_id}.yaml"
            body = _party_config(party_id, tables, self.coordinator_address)
            config.write_text(yaml.safe_dump(body))
            args = ["party", "serve", "--config", str(config), *self.tls_args, *self.party_args]
            started.append(self._add(f"party-{party_id}", args))
            started[-1].spawn()
        for daemon in started:
            daemon.wait_serving()

    def kill(self, name: str) -> None:
        """kill -9 the daemon `name` (see `daemon`) alone: no clean-up, no goodbye."""
        self.daemon(name).kill()

    def restart(self, name: str) -> int:
        """Start the daemon `name` again with the same config, state and job database
        (the coordinator on its previous port, which the parties know); returns its port.

        Raises:
            CoordinatorError: it did not start (with the end of its log).
        """
        daemon = self.daemon(name)
        if daemon is self.daemons.get(COORDINATOR):
            at = daemon.args.index("--listen") + 1
            daemon.args[at] = self.coordinator_address
        daemon.stop()  # if it still runs
        return daemon.start()

    def stop(self) -> None:
        """SIGTERM to every process, SIGKILL to those still running 10 s later."""
        stop_all(self.daemons.values())

    def _add(self, name: str, args: list[str]) -> Daemon:
        self.daemons[name] = Daemon(name, args, self.workdir)
        return self.daemons[name]


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
