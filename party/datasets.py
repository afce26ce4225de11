"""A job's datasets at one party: resolved from the party's own config (never a path a
job names), snapshotted when they come from a database, checked for repeated ids once
read, and aligned with the other parties' rows by PSI. Training and batch prediction
share these steps."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

from vfl.contract.spec import JobSpec, TableSource
from vfl.party.errors import DataError, JobError
from vfl.party.state import StateDir
from vfl.party.state.snapshots import Snapshots
from vfl.party.tables.table import RawTable, Table
from vfl.secure.channel import Channel
from vfl.secure.errors import PsiError
from vfl.secure.executor import BlockExecutor
from vfl.secure.psi.curve import check_unique
from vfl.secure.psi.protocol import PsiConfig, PsiResult, run_psi


class Dataset(NamedTuple):
    """A dataset of the party's config, with the job's column settings applied."""

    name: str
    source: TableSource


def resolve_dataset(
    spec: JobSpec, party_id: str, datasets: dict[str, TableSource], test: bool = False
) -> Dataset | None:
    """The dataset (or test dataset) this party uses, from its own config only.

    Raises:
        JobError: the job names a path, or a dataset this party does not expose.
    """
    data = spec.party(party_id).data
    if data.path is not None or data.test_path is not None:
        raise JobError(
            f"party '{party_id}' does not open paths named in job specs; expose the file as a "
            f"dataset in the party config and name it with data: {{dataset: NAME}}"
        )
    name = data.test_dataset if test else data.dataset
    if name is None:
        return None
    if name not in datasets:
        raise JobError(
            f"party '{party_id}' exposes no dataset '{name}'; it exposes "
            f"{sorted(datasets) or 'none'}: add it under 'datasets' in the party config"
        )
    source = datasets[name]
    if source.format == "sql" and data.format is not None:
        raise JobError(
            f"party '{party_id}' reads dataset '{name}' from a database; a job cannot change "
            f"its format to {data.format}: remove 'format' from the job's data"
        )
    return Dataset(name, source.model_copy(update=data.given()))


@contextmanager
def snapshotted(
    dataset: Dataset, state: StateDir | None, job_id: str, party_id: str
) -> Iterator[Dataset]:
    """`dataset` as the table reader can read it while the block runs: a sql dataset is
    queried into a snapshot of job `job_id`, removed when the block ends (a prediction
    reads its rows once); a file is itself."""
    if dataset.source.format != "sql":
        yield dataset
        return
    folder = Snapshots(state, job_id, party_id)
    try:
        folder.take(dataset.name, dataset.source)
        yield Dataset(dataset.name, folder.source(dataset.name, dataset.source))
    finally:
        folder.drop("its rows were read")


def check_ids(table: RawTable | Table, dataset: str) -> None:
    """Check that each id of `table` (dataset `dataset`'s rows) names one row, as PSI
    needs, at PREPARE: a repeat refuses the job as bad input before any party starts,
    rather than failing it in PSI.

    Raises:
        DataError: some id occurs in more than one row (names counts, never an id).
    """
    try:
        check_unique(table.ids, f"dataset '{dataset}'")
    except PsiError as exc:
        raise DataError(str(exc)) from None


def align_rows(
    channel: Channel,
    spec: JobSpec,
    party_id: str,
    table: RawTable | Table,
    tag: str,
    executor: BlockExecutor | None = None,
    dataset: str = "",
) -> PsiResult:
    """PSI of `table`'s ids with the job's other parties (tag `tag`): the common rows'
    positions in `table`, in the order every party shares; large chunks of points are
    blinded on the party's `executor` (None: local processes). `dataset`, the table's
    name, is named by an error about its ids (repeated ids, say)."""
    return run_psi(
        channel,
        party_id,
        spec.active.id,
        [p.id for p in spec.passives],
        table.ids,
        tag,
        seed=spec.train.seed,
        config=PsiConfig(timeout=spec.train.timeout_s),
        executor=executor,
        source=f"dataset '{dataset}'" if dataset else "",
    )
