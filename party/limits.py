"""A party's limits (`limits:` in its config) and what a job will hold, checked at PREPARE.

```yaml
limits:                     # every field optional; defaults from this machine
  memory_gb: 12             # the daemon's process tree (it and its workers); default 3/4
                            # of the machine's memory (or of its cgroup's limit)
  max_parameters: 500000000 # model parameters of one job at this party; default: what
                            # fits the memory at 16 bytes a parameter
  max_rows: 50000000        # rows of one job's tables here; default: memory / 256 bytes
  max_concurrent_jobs: 4    # jobs held at once; more wait QUEUED; default max(4, 2 x cores)
  max_job_seconds: 604800   # a job running longer here fails; default 7 days
  max_envelope_mb: 256      # one envelope a peer sends here; a larger one is refused
                            # before its payload is read
  mailbox_mb: 512           # a job's (or scoring session's) envelopes held here: received
                            # and not yet taken, and those arriving; beyond, refused
  peer_streams: 16          # Push streams one certificate holds here at once
  chunk_timeout_s: 10       # a Push stream that sends no chunk for this long is cancelled
```

Before a party loads a job's data or builds its model, `estimate_job` says what the job
will hold from cheap facts: the tables' row counts (Parquet metadata; a CSV or LIBSVM
file's size over its first MiB's lines), their header's columns, and the spec's layer
widths. `admit` then refuses a job that is over a limit on its own (`LimitExceeded`: the
job FAILs, naming the limit, the estimate and the fix) and defers one that fits alone
but not beside the jobs running now (`PartyBusy`: the coordinator queues it). The guard
(`party.guard`) watches what jobs really hold while they run; max_rows holds against the
rows a job's table reader has read too (a CSV whose first MiB is one wide row estimates
few), with the same wording (`too_many_rows`).

The last four bound what peers' envelopes hold here, whatever their jobs say
(`party.transport.endpoint`, the data plane in `party.server`): an envelope's size and
its job are checked from its header, before its payload is read. The largest envelopes
real jobs send are PSI's row order (`rows/<peer>`, 8 bytes a common row: 80 MB at 10
million rows) and a wide source layer's encrypted weights at setup (a 512-byte
ciphertext per input column at 2048 bits); a batch's messages take a few MiB at usual
batch sizes, and validation and PSI's point streams travel in pieces of a few MiB at
most. 256 MiB leaves those room (PSI of 33 million rows); a party that needs more raises
`max_envelope_mb`, which the refusal names.

Bytes a table holds: `ROW_BYTES` a row (its id, label, the PSI's points and digests, the
aligned order) plus `CELL_BYTES` a cell (the raw float32 column and its preprocessed
copy); bench/results/scale_rows.txt measured 2.1 GB over an idle daemon for 1e7 rows of
14 cells, which this puts at 2.7 GB. What the model holds is its kind's estimate
(`party.kinds`: `ModelKind.estimate`, and `parameters` once the inputs are loaded).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field, model_validator
from vfl.contract.spec import JobSpec, TableSource
from vfl.party.errors import LimitExceeded, PartyBusy
from vfl.party.kinds import kind_of

GB = 1 << 30
MB = 1 << 20
MAX_ENVELOPE_MB = 4096  # the most `max_envelope_mb` may say
ROW_BYTES = 160
CELL_BYTES = 8
PARAMETER_DEFAULT_BYTES = 16  # a parameter, for the default max_parameters (docstring)
SAMPLE_BYTES = 1 << 20  # a text file's rows: its size over this much of its start's lines
MEMORY_SHARE = 0.75  # of the machine's memory, the default limit


def machine_memory_bytes() -> int:
    """This machine's memory, or its cgroup's limit if lower (a container's)."""
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    try:
        text = Path("/sys/fs/cgroup/memory.max").read_text().strip()
    except OSError:
        return total
    return min(total, int(text)) if text.isdigit() else total


class Limits(BaseModel):
    """What one party lets a job hold (`limits:` in the party config)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    memory_gb: float = Field(
        gt=0, description="GiB the daemon's process tree (it and its workers) may hold"
    )
    max_parameters: int = Field(ge=1, description="model parameters of one job here")
    max_rows: int = Field(ge=1, description="rows of one job's tables here")
    max_concurrent_jobs: int = Field(ge=1, description="jobs held at once; more wait QUEUED")
    max_job_seconds: float = Field(7 * 86400.0, gt=0, description="a job's longest run here")
    max_envelope_mb: float = Field(
        256,
        ge=1,
        le=MAX_ENVELOPE_MB,
        description="MiB of one envelope a peer sends here; a larger one is refused before "
        "its payload is read",
    )
    mailbox_mb: float = Field(
        512,
        ge=1,
        le=MAX_ENVELOPE_MB * 4,
        description="MiB of one job's (or scoring session's) envelopes held here: received "
        "and not yet taken, and those arriving; one beyond is refused (the sender retries)",
    )
    peer_streams: int = Field(
        16, ge=1, le=1024, description="Push streams one peer's certificate holds here at once"
    )
    chunk_timeout_s: float = Field(
        10.0,
        gt=0,
        le=3600,
        description="a Push stream that sends no chunk for this long is cancelled",
    )

    @model_validator(mode="before")
    @classmethod
    def _machine_defaults(cls, data: Any) -> Any:
        """Fields not given: from this machine (max_parameters and max_rows from memory_gb)."""
        if data is None:
            data = {}
        if not isinstance(data, dict):
            return data
        out = dict(data)
        if out.get("memory_gb") is None:
            out["memory_gb"] = round(machine_memory_bytes() * MEMORY_SHARE / GB, 2)
        memory = out["memory_gb"]
        if isinstance(memory, int | float) and not isinstance(memory, bool) and memory > 0:
            if out.get("max_parameters") is None:
                out["max_parameters"] = max(1, int(memory * GB) // PARAMETER_DEFAULT_BYTES)
            if out.get("max_rows") is None:
                out["max_rows"] = max(1, int(memory * GB) // 256)
        if out.get("max_concurrent_jobs") is None:
            out["max_concurrent_jobs"] = max(4, 2 * (os.cpu_count() or 1))
        return out

    @model_validator(mode="after")
    def _envelope_fits_mailbox(self) -> Limits:
        if self.mailbox_mb < self.max_envelope_mb:
            raise ValueError(
                f"mailbox_mb ({self.mailbox_mb:g}) must be at least max_envelope_mb "
                f"({self.max_envelope_mb:g}): a job's mailbox holds its largest envelope"
            )
        return self

    @classmethod
    def of_machine(cls) -> Limits:
        """Every limit at its default for this machine."""
        return cls.model_validate({})

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_gb * GB)

    @property
    def max_envelope_bytes(self) -> int:
        return int(self.max_envelope_mb * MB)

    @property
    def mailbox_bytes(self) -> int:
        return int(self.mailbox_mb * MB)


@dataclass(frozen=True)
class JobEstimate:
    """What a job will hold at one party: its tables' rows and columns (None: unknown,
    e.g. a database's), its model's parameters, the bytes of both, and of those the
    tables' (`table_bytes`)."""

    rows: int | None
    columns: int | None
    parameters: int
    bytes: int
    table_bytes: int = 0


def estimate_job(
    spec: JobSpec, party_id: str, tables: Sequence[TableSource], training: bool = True
) -> JobEstimate:
    """What job `spec` will hold at party `party_id` reading `tables` (its training table,
    then its test table if any); a prediction (`training=False`) builds no new model."""
    sizes = [table_size(t) for t in tables]
    known = [s for s in sizes if s is not None]
    rows = sum(r for r, _ in known) if len(known) == len(sizes) and sizes else None
    columns = max((c for _, c in known), default=None)
    table_bytes = sum(r * (ROW_BYTES + c * CELL_BYTES) for r, c in known)
    model = kind_of(spec).estimate(spec, party_id, columns or 0, training, rows)
    return JobEstimate(rows, columns, model.parameters, table_bytes + model.bytes, table_bytes)


def table_size(source: TableSource) -> tuple[int, int] | None:
    """A table's rows and feature columns from cheap facts (module docstring); None for a
    database's rows, or a file that cannot be read (its reader names why)."""
    if source.format == "sql" or source.path is None:
        return None
    path = Path(source.path)
    try:
        if source.format == "parquet":
            files = sorted(path.glob("*.parquet")) if path.is_dir() else [path]
            metas = [pq.ParquetFile(f).metadata for f in files]
            rows = sum(m.num_rows for m in metas)
            columns = max((m.num_columns for m in metas), default=0)
        else:
            rows, columns = _text_size(path, source.format == "libsvm")
    except (OSError, ValueError):
        return None
    return rows, max(0, columns - 1 - int(source.label is not None))


def _text_size(path: Path, libsvm: bool) -> tuple[int, int]:
    """A text table's rows (its size over the mean length of its first MiB's lines) and
    cells a row (CSV: the header's; LIBSVM: the most of a sampled line's)."""
    size = path.stat().st_size
    with path.open("rb") as fh:
        head = fh.read(SAMPLE_BYTES)
    lines = head.splitlines()
    if not lines:
        return 0, 0
    if libsvm:
        columns = max(len(line.split()) for line in lines) + 1
        count = len(lines)
    else:
        columns = lines[0].count(b",") + 1
        count = len(lines) - 1
    if size <= len(head) or count <= 0:
        return max(count, 0), columns
    return int(size * len(lines) / len(head)), columns


def admit(
    estimate: JobEstimate,
    limits: Limits,
    held: int,
    idle_bytes: int,
    now_bytes: int,
) -> None:
    """Whether this party takes a job of `estimate` now, with `held` other jobs held, its
    process tree holding `idle_bytes` with no job and `now_bytes` now.

    Raises:
        LimitExceeded: the job is over a limit on its own (names it, the estimate, the fix).
        PartyBusy: it fits alone, but not beside the jobs held now (it waits for them).
    """
    if estimate.parameters > limits.max_parameters:
        raise too_many_parameters(estimate.parameters, limits)
    if estimate.rows is not None and estimate.rows > limits.max_rows:
        raise too_many_rows(f"about {estimate.rows:,}", limits.max_rows)
    if idle_bytes + estimate.bytes > limits.memory_bytes:
        raise too_much_memory(estimate.bytes, idle_bytes, limits)
    if held >= limits.max_concurrent_jobs:
        raise PartyBusy(
            f"this party holds {held} jobs, its limit max_concurrent_jobs; the job waits "
            "for one of them to end"
        )
    if held and now_bytes + estimate.bytes > limits.memory_bytes:
        raise PartyBusy(
            f"the job's {_gb(estimate.bytes)} do not fit beside the {held} jobs held now "
            f"(memory_gb = {limits.memory_gb:g}); it waits for one of them to end"
        )


def too_many_rows(rows: str, max_rows: int) -> LimitExceeded:
    """Over max_rows: `rows`, what the job's tables hold ("about 2,000": the estimate's;
    "at least 2,000": what its reader has read)."""
    return LimitExceeded(
        f"the job's tables hold {rows} rows here, over this party's limit max_rows = "
        f"{max_rows:,}; use a smaller dataset, or ask the party's operator to raise "
        "limits.max_rows in its config"
    )


def too_many_parameters(parameters: int, limits: Limits) -> LimitExceeded:
    return LimitExceeded(
        f"the job's model holds {parameters:,} parameters here, over this party's limit "
        f"max_parameters = {limits.max_parameters:,}; use narrower or fewer layers "
        "(model.source.hidden, model.top.hidden) or embeddings (model.source.embedding_dim), "
        "or ask the party's operator to raise limits.max_parameters in its config"
    )


def too_much_memory(job_bytes: int, daemon_bytes: int, limits: Limits) -> LimitExceeded:
    return LimitExceeded(
        f"the job would hold about {_gb(job_bytes)} here ({_gb(job_bytes + daemon_bytes)} "
        f"with the daemon's own), over this party's limit memory_gb = {limits.memory_gb:g}; "
        "use a smaller model or dataset, or ask the party's operator to raise "
        "limits.memory_gb in its config"
    )


def model_parameters(spec: JobSpec, party_id: str, width: int, cardinalities: Sequence[int]) -> int:
    """The parameters this party's model of `spec` holds over loaded inputs of `width`
    numeric columns and categorical columns of `cardinalities` (its kind's count)."""
    return kind_of(spec).parameters(spec, party_id, width, cardinalities)


def _gb(n: int) -> str:
    return f"{n / GB:.2f} GiB"
