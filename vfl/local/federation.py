"""A federation on this machine for trying the API (a notebook, a test): a coordinator and
party daemons as local processes with mutual TLS, and a `Client` connected to them as the
operator `admin` (`vfl.local.run.launched`, what `vfl run` starts).

    federation = vfl.local_federation({"bank": {"breast": "bank.csv"}, ...}, workdir="fed")
    client = federation.client
    ...
    federation.close()          # or: with vfl.local_federation(...) as client: ...
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from os import PathLike, fspath
from pathlib import Path
from typing import Any, cast

from vfl.client import Client
from vfl.contract.errors import SpecError
from vfl.contract.spec import JobSpec, TableSource, explain
from vfl.local.run import launched
from vfl.local.topology import as_datasets, spec_datasets
from vfl.specs import SpecLike, as_spec

Table = TableSource | Mapping[str, Any] | str | PathLike[str]  # a path: a csv with column id
Parties = Mapping[str, Mapping[str, Table]]  # party id -> dataset name -> its table


@dataclass(frozen=True)
class LocalFederation:
    """Running local processes: `client` (the operator's), the folder with their configs,
    logs, job store and CA (`workdir`), each party's datasets, and, when started from a
    spec, that spec reading those datasets (`spec`, ready to submit)."""

    client: Client
    workdir: Path
    tls_dir: Path | None
    datasets: dict[str, dict[str, TableSource]]
    spec: JobSpec | None
    _stack: ExitStack = field(repr=False, compare=False)

    def close(self) -> None:
        """Close the client and stop every process (a temporary folder is removed)."""
        self._stack.close()

    def __enter__(self) -> Client:
        return self.client

    def __exit__(self, *exc: object) -> None:
        self.close()


def local_federation(
    parties: Parties | SpecLike,
    workdir: str | PathLike[str] | None = None,
    *,
    tls: bool = True,
) -> LocalFederation:
    """Start a coordinator and parties as local processes; returns them running.

    Args:
        parties: each party's datasets, {party id: {dataset name: table}}, a table being a
            path (a csv with an `id` column) or a mapping as a party config's `datasets:`
            entry ({"path": ..., "label": "y", ...}); or a job spec (a `JobSpec`, a mapping
            with `parties`, or a YAML file) whose parties' files become their datasets
            `data` (and `test`), as `vfl run` does: submit `federation.spec`.
        workdir: where the processes keep configs, logs, the job store and the CA (kept
            afterwards); without it, a temporary folder removed by `close()`.
        tls: mutual TLS between every process and the client (a fresh CA).

    Raises:
        SpecError: a table or the spec is invalid (names the field), or the spec names a
            dataset instead of a file.
        CoordinatorError: a process did not start (with the end of its log).
    """
    spec, datasets = _datasets(parties)
    stack = ExitStack()
    try:
        folder = None if workdir is None else fspath(workdir)
        procs = stack.enter_context(launched(datasets, folder, tls=tls, went_well=lambda: True))
        client = stack.enter_context(Client(procs.topology.coordinator_address, procs.tls_dir))
    except BaseException:
        stack.close()
        raise
    federation = LocalFederation(client, procs.base, procs.tls_dir, datasets, spec, stack)
    weakref.finalize(federation, stack.close)  # stopped at exit if never closed
    return federation


def _datasets(
    parties: Parties | SpecLike,
) -> tuple[JobSpec | None, dict[str, dict[str, TableSource]]]:
    """(the spec rewritten to datasets, or None; each party's datasets, paths absolute:
    relative ones are relative to this process's folder, or a spec file's)."""
    if isinstance(parties, Mapping) and "parties" not in parties:
        tables: Parties = parties
        spec = None
    else:
        spec = as_spec(cast(SpecLike, parties))
        try:
            tables = spec_datasets(spec)
        except ValueError as exc:  # a party's data names a dataset
            raise SpecError(f"{exc}: give each party's files (data: {{path: ...}})") from None
    named = {
        str(party): {str(name): _table(party, name, t) for name, t in given.items()}
        for party, given in tables.items()
    }
    return (None if spec is None else as_datasets(spec)), named


def _table(party: str, name: str, table: Table) -> TableSource:
    """Raises:
    SpecError: the table is invalid (names party, dataset and field)."""
    from pydantic import ValidationError

    if isinstance(table, TableSource):
        raw: Any = table
    elif isinstance(table, Mapping):
        raw = dict(table)
    else:
        raw = {"path": str(table)}
    try:
        source = TableSource.model_validate(raw)
    except ValidationError as exc:
        problem = explain(exc, TableSource, whole="the table")
        raise SpecError(f"party '{party}', dataset '{name}': {problem}") from None
    field = "password_file" if source.format == "sql" else "path"  # sql: no file but this
    given = getattr(source, field)
    if given is None:
        return source
    return source.model_copy(update={field: str(Path(given).expanduser().resolve())})
