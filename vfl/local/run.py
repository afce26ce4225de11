"""`vfl run` / `vfl demo` / `vfl.local_federation`: a coordinator and parties as local
processes (`vfl.local.topology`), with their folder, CA and an admin client; on Ctrl-C the
launcher cancels the job and stops them.

With `tls` (the default) the run gets its own federation CA in `<workdir>/tls` and every
process (coordinator, parties, and this launcher as `admin`) uses mutual TLS. A run
without a workdir removes its temporary folder, CA key included, when it ends.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from vfl.contract.spec import JobSpec, TableSource
from vfl.coordinator.client import CoordinatorClient, JobView
from vfl.local.daemon import VFL
from vfl.local.topology import LocalTopology, as_datasets, spec_datasets
from vfl.rpc import COORDINATOR_ID
from vfl.secure.pki.federation import ADMIN_ID, load_identity, local_federation
from vfl.specs import spec_to_yaml

__all__ = [  # LocalTopology and spec_to_yaml: also here, where `vfl run`'s tests import them
    "LocalProcesses",
    "LocalRun",
    "LocalTopology",
    "follow_or_cancel",
    "launched",
    "run_local",
    "spec_to_yaml",
    "started",
]


@dataclass(frozen=True)
class LocalProcesses:
    """A started local federation: its folder, its processes, the admin's coordinator
    client and the folder of the run's CA (None without TLS)."""

    base: Path
    topology: LocalTopology
    client: CoordinatorClient
    tls_dir: Path | None

    def vfl(self, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        """`vfl ARGS` as the operator (identity admin) against this federation's
        coordinator, its output captured."""
        flags = ["--coordinator", self.topology.coordinator_address]
        if self.tls_dir is not None:
            flags += ["--tls", str(self.tls_dir), "--identity", ADMIN_ID]
        return subprocess.run(
            [*VFL, *args, *flags], capture_output=True, text=True, timeout=timeout
        )


@dataclass(frozen=True)
class LocalRun(LocalProcesses):
    """A local federation started for a spec, with the spec rewritten to the parties'
    datasets (what to submit)."""

    spec: JobSpec

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
def launched(
    datasets: Mapping[str, Mapping[str, TableSource]],
    workdir: str | Path | None = None,
    party_args: tuple[str, ...] = (),
    *,
    tls: bool = True,
    went_well: Callable[[], bool] = lambda: False,
    coordinator_args: tuple[str, ...] = (),
) -> Iterator[LocalProcesses]:
    """A coordinator and a party per id of `datasets` (exposing those datasets) as local
    processes, stopped when the block ends.

    With `tls`, a fresh CA and certificates for every process go to `<workdir>/tls`.
    Without `workdir` the run gets a temporary folder, removed when the block ends however
    it ends (its CA's private key with it); unless `went_well()` says so
    (or the user interrupted it), the warnings and errors of its logs are printed on
    stderr first. `party_args` and `coordinator_args` go to the daemons' command lines.

    Raises:
        CoordinatorError: a process did not start (with the end of its log).
    """
    base = Path(workdir).resolve() if workdir else Path(tempfile.mkdtemp(prefix="vfl-run-"))
    show_logs = not workdir
    try:
        base.mkdir(parents=True, exist_ok=True)
        ids = [COORDINATOR_ID, ADMIN_ID, *datasets]
        tls_dir = local_federation(base / "tls", ids) if tls else None
        topology = LocalTopology(base, party_args, tls_dir, coordinator_args)
        client = None
        try:
            topology.start_coordinator()
            topology.start_parties(datasets)
            admin = load_identity(tls_dir, ADMIN_ID) if tls_dir else None
            client = CoordinatorClient(topology.coordinator_address, admin)
            yield LocalProcesses(base, topology, client, tls_dir)
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
    """`launched` for `spec`'s parties, each exposing its files in the spec as datasets
    (`spec_datasets`).

    Raises:
        CoordinatorError: a process did not start (with the end of its log).
        ValueError: a party's data names a dataset, not a file.
    """
    datasets = spec_datasets(spec)
    with launched(
        datasets,
        workdir,
        party_args,
        tls=tls,
        went_well=went_well,
        coordinator_args=coordinator_args,
    ) as procs:
        yield LocalRun(procs.base, procs.topology, procs.client, procs.tls_dir, as_datasets(spec))


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
