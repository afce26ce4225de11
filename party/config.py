"""The party daemon's config file (`vfl party serve --config party.yaml`).

```yaml
party: bank                       # this party's id
listen: 127.0.0.1:0               # port 0: the OS picks one
coordinator: 127.0.0.1:7700
peers: {shop: 127.0.0.1:7702}     # optional; else the coordinator tells peer addresses
datasets:
  breast: {path: data/guest.csv, format: csv, id: id, label: y}
  applicants: {path: live/applicants.csv, serve: true}   # optional; see below
  customers:                      # a PostgreSQL query's rows (the [sql] extra)
    format: sql
    url: postgresql://vfl_reader@db.bank.internal:5432/crm    # never a password here
    query: SELECT customer_id AS id, age, income FROM customers
    password_env: PGPASS_CRM      # or password_file: secrets/crm.pw (its first line)
    serve: true                   # optional: online scoring looks ids up in it too
state_dir: bank-state             # optional; default: <party>-state beside this file
output_dir: bank-scores           # optional; default: <state_dir>/predictions
scorers: [admin, risk-app]        # optional; who may score online here (default: any
                                  # identity of the federation but the models' passive parties)
compute:                          # optional; where the party's Paillier work runs
  executor: ray                   # local (default: this machine's cores) or ray
  address: 10.0.0.5:6379          # ray: the head of the party's own Ray cluster
  min_task_ms: 20                 # least one-core ms of work per task (every op)
  kept_keys: 4                    # peers' keys whose obfuscator pools outlive jobs
  kept_obfuscators: 4096          # each filled up to this while no job runs
limits:                           # optional; what a job may hold here (`party.limits`)
  memory_gb: 12                   # default: 3/4 of this machine's memory
  max_parameters: 500000000       # default: what fits memory_gb at 16 bytes each
  max_rows: 50000000              # default: memory_gb / 256 bytes
  max_concurrent_jobs: 4          # more jobs wait QUEUED; default max(4, 2 x cores)
  max_job_seconds: 604800         # default 7 days
  max_envelope_mb: 256            # one envelope a peer sends here
  mailbox_mb: 512                 # a job's envelopes held here, not yet taken
  peer_streams: 16                # Push streams one certificate holds here at once
  chunk_timeout_s: 10             # a Push stream silent this long is cancelled
scoring:                          # optional; online scoring's capacity at this daemon
  deadline_s: 1.0                 # a call is admitted if it can be scored within this
  threads: 1024                   # Predict calls held at once, all models together
  queue: 1024                     # per model: requests waiting for its micro-batches
stability:                        # optional; what of its columns' population stability
  share: counts                   # crosses: counts (default: how many columns are at
                                  # watch and at shift), columns (each column's index
                                  # under an opaque name c1, c2, ...), names (under its name)
analysis:                         # optional; what WOE/IV analyses reveal (party.analysis.sharing)
  share_names: false              # passive: its column names to the active party and the result
  report_bins: false              # passive: its bin edges and categories into the job's result
  show_passive: false             # active: each passive party gets its own columns' counts
```
`limits` is a `party.limits.Limits`: checked at PREPARE against each job's estimate (a job
over one FAILs naming it; one that fits alone but not beside the jobs held now waits
QUEUED), and while jobs run (`party.guard`: a job whose memory grows past memory_gb, or
that runs longer than max_job_seconds, fails; the others go on), and what peers'
envelopes may hold here, checked from each envelope's header before its payload is read
(`party.transport.endpoint`, the Push planes of `party.server`).
`compute` is a `secure.executor.ComputeConfig`: the party's infrastructure, never part of
a job spec. `executor: ray` needs Ray installed beside the daemon (`pip install -e
".[ray]"`); the daemon joins the cluster at its first job. `min_task_ms` is one number
for decryptions, re-randomisations and products: the executor's cost model
(`secure.executor.OP_COSTS_MS`, scaled with the key size) turns it into items per task
(at 2048 bits and 20 ms: 8 decryptions, 13 table re-randomisations, 1,112 product terms,
625 PSI points).
`scoring` is a `ScoringLimits`: a `Predict` is admitted into its model's micro-batches if
the batches ahead of it and its own are estimated, from their measured cost, to end
within `deadline_s` (or the call's own deadline, if sooner); one beyond that, or beyond
either bound, is refused at once with RESOURCE_EXHAUSTED and a retry hint
(docs/operations.md, "Capacity and overload"); training's data plane and the
coordinator's calls run on threads of their own, which no scoring load takes.
A dataset entry is a `vfl.contract.spec.TableSource`, the same model as a job's `data:` by
path. `serve: true` (a party config only) makes it a serving table: online scoring (`vfl
score`) looks ids up in the serving tables, in the order listed here, then in the
dataset the model was trained on, and takes the first row found, so a serving table's row
wins over the training table's (`party.inference.rows`). Each is read with its own
format, id and label settings and the model's fitted preprocessing, read again when its
file changes, and skipped with a warning for a model whose columns it does not have.
A `format: sql` entry (url, query or table, and where its password is) exists only
here: a job spec cannot name a database, a query or a credential, and a url holding a
password is refused when the config loads. Each job reads such a dataset once, at PREPARE,
into a Parquet snapshot in the state directory, which a resume reads again (`party.tables.sql`,
`party.state.snapshots`). Online scoring takes no snapshot: a sql dataset that a model
was trained on, or one marked `serve: true`, is queried for the ids of each micro-batch
(the ids as a parameter, through a small pool of read-only connections with a statement
timeout; `party.tables.sql_lookup`), so a changed or added row is scored at the next request,
and a database that fails fails those requests, naming the party and the dataset.
Relative paths (datasets, password files, state_dir) resolve
against the config file's folder. The state directory holds the party's checkpoints, keys,
model parts and snapshots, never a path a job names; the output folder the scores of
prediction jobs (active party only).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from vfl.contract.spec import TableSource, explain
from vfl.party.analysis.sharing import AnalysisSharing
from vfl.party.errors import ConfigError
from vfl.party.limits import Limits
from vfl.party.tables.stability import Share
from vfl.secure.errors import ConfigError as SecureConfigError, ExecutorError
from vfl.secure.executor import ComputeConfig, make_executor

_TOP = {
    "party",
    "listen",
    "coordinator",
    "peers",
    "datasets",
    "advertise",
    "state_dir",
    "output_dir",
    "scorers",
    "compute",
    "limits",
    "scoring",
    "stability",
    "analysis",
}
S = TypeVar("S", bound=BaseModel)  # a section of the config
MAX_SCORING_THREADS = 4096  # of `scoring.threads` and `scoring.queue`
MAX_SCORING_DEADLINE_S = 60.0


class ScoringLimits(BaseModel):
    """Online scoring's capacity at one daemon (`scoring:` in the party config): a
    `Predict` its model's micro-batches cannot answer within `deadline_s`, or beyond
    either bound, is refused at once (RESOURCE_EXHAUSTED, retry hint)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    deadline_s: float = Field(
        1.0,
        gt=0,
        le=MAX_SCORING_DEADLINE_S,
        description="a Predict is admitted if the micro-batches ahead of it and its own "
        "are estimated (from their measured cost) to end within this many seconds, or "
        "within the call's own deadline if sooner",
    )
    threads: int = Field(
        1024,
        ge=1,
        le=MAX_SCORING_THREADS,
        description="Predict calls held at once, every model together (each waits on a "
        "thread of the scoring plane for its micro-batch; the threads start at the "
        "first call)",
    )
    queue: int = Field(
        1024,
        ge=1,
        le=MAX_SCORING_THREADS,
        description="per model, requests waiting for its micro-batches (one runs at a "
        "time, of up to 64 ids)",
    )


class StabilitySharing(BaseModel):
    """What of the party's columns' population stability a prediction's result carries
    (`stability:` in the party config; docs/security.md). The party keeps every column's
    index itself (its model store's `stability.json`, its log)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    share: Share = Field(
        "counts",
        description="counts: how many columns are at watch and at shift; columns: each "
        "column's index under an opaque name (c1, c2, ... in the model's order); names: "
        "each under its name",
    )


@dataclass(frozen=True)
class PartyConfig:
    party_id: str
    listen: str = "127.0.0.1:0"
    coordinator: str | None = None
    advertise: str | None = None  # address peers should dial; defaults to the bound address
    peers: dict[str, str] = field(default_factory=dict)
    datasets: dict[str, TableSource] = field(default_factory=dict)
    state_dir: Path | None = None  # checkpoints, keys, models; None: nothing is kept
    output_dir: Path | None = None  # scores of prediction jobs; None: <state_dir>/predictions
    scorers: tuple[str, ...] = ()  # identities that may score online here; (): see above
    compute: ComputeConfig = field(default_factory=ComputeConfig)  # where Paillier work runs
    limits: Limits = field(default_factory=Limits.of_machine)  # what a job may hold here
    scoring: ScoringLimits = field(default_factory=ScoringLimits)  # online scoring's capacity
    stability: StabilitySharing = field(default_factory=StabilitySharing)  # what crosses
    analysis: AnalysisSharing = field(default_factory=AnalysisSharing)  # what WOE/IV reveals

    @property
    def scores_dir(self) -> Path | None:
        """Where prediction jobs write scores (None: this party keeps no files)."""
        if self.output_dir is not None:
            return self.output_dir
        return None if self.state_dir is None else self.state_dir / "predictions"


def load_party_config(path: str | Path) -> PartyConfig:
    """Read a party config file.

    Raises:
        ConfigError: missing file, bad YAML, unknown or ill-typed field.
    """
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"party config '{path}' does not exist")
    try:
        raw = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"party config '{path}' is not valid YAML: {exc}") from exc
    try:
        return parse_party_config(raw, p.resolve().parent)
    except ConfigError as exc:
        raise ConfigError(f"party config '{path}': {exc}") from None


def parse_party_config(raw: Any, base: Path) -> PartyConfig:
    """A party config from its parsed YAML; relative paths are resolved against `base`.

    Raises:
        ConfigError: an unknown or ill-typed field, named by its path in the file.
    """
    if not isinstance(raw, dict) or "party" not in raw:
        raise ConfigError("it must be a mapping with at least 'party: <id>'")
    unknown = sorted(set(raw) - _TOP)
    if unknown:
        raise ConfigError(f"unknown top-level field(s) {unknown}; allowed: {sorted(_TOP)}")
    peers = raw.get("peers") or {}
    if not isinstance(peers, dict) or not all(isinstance(v, str) for v in peers.values()):
        raise ConfigError("'peers' must map party ids to 'host:port' addresses")
    datasets = raw.get("datasets") or {}
    if not isinstance(datasets, dict):
        raise ConfigError(
            "'datasets' must map dataset names to {path, format, id, label, categorical}"
        )
    scorers = raw.get("scorers") or []
    if not isinstance(scorers, list) or not all(isinstance(v, str) for v in scorers):
        raise ConfigError("'scorers' must list the identities that may score online here")
    return PartyConfig(
        party_id=str(raw["party"]),
        listen=str(raw.get("listen", "127.0.0.1:0")),
        coordinator=None if raw.get("coordinator") is None else str(raw["coordinator"]),
        advertise=None if raw.get("advertise") is None else str(raw["advertise"]),
        peers={str(k): v for k, v in peers.items()},
        datasets={str(k): _dataset(str(k), v, base) for k, v in datasets.items()},
        state_dir=base / str(raw.get("state_dir") or f"{raw['party']}-state"),
        output_dir=None if raw.get("output_dir") is None else base / str(raw["output_dir"]),
        scorers=tuple(scorers),
        compute=_compute(raw.get("compute")),
        limits=_section(raw.get("limits"), Limits, "limits", "{memory_gb, max_parameters, ...}"),
        scoring=_section(
            raw.get("scoring"), ScoringLimits, "scoring", "{deadline_s, threads, queue}"
        ),
        stability=_section(
            raw.get("stability"), StabilitySharing, "stability", "{share: counts | columns | names}"
        ),
        analysis=_section(
            raw.get("analysis"),
            AnalysisSharing,
            "analysis",
            "{share_names, report_bins, show_passive}",
        ),
    )


def _section(raw: Any, model: type[S], name: str, shape: str) -> S:
    """The config's mapping `name` as `model` (fields not given: the model's defaults;
    `Limits`: those of this machine).

    Raises:
        ConfigError: not a mapping (`shape` says what it should be), or an unknown or
            invalid `NAME.FIELD`.
    """
    if raw is not None and not isinstance(raw, dict):
        raise ConfigError(f"'{name}' must be a mapping {shape}")
    try:
        return model.model_validate(raw or {})
    except ValidationError as exc:
        raise ConfigError(explain(exc, model, name, "party config")) from None


def _compute(raw: Any) -> ComputeConfig:
    """Raises:
    ConfigError: an unknown or invalid `compute.FIELD`, or `executor: ray` without Ray."""
    if raw is None:
        return ComputeConfig()
    if not isinstance(raw, dict):
        raise ConfigError("'compute' must be a mapping {executor, address, min_task_ms, ...}")
    if "min_block" in raw:
        raise ConfigError(
            "compute.min_block (items per task, one count for every operation) was replaced "
            "by compute.min_task_ms: the least one-core milliseconds of work per task "
            "(e.g. 20); remove min_block and set that"
        )
    fields = set(ComputeConfig.__dataclass_fields__)
    unknown = sorted(set(raw) - fields)
    if unknown:
        raise ConfigError(f"unknown field(s) {unknown} under 'compute'; allowed: {sorted(fields)}")
    try:
        config = ComputeConfig(**{str(k): v for k, v in raw.items()})
    except (SecureConfigError, TypeError) as exc:
        raise ConfigError(str(exc)) from None
    if config.executor == "ray":
        try:
            make_executor(config)  # imports ray, connects nothing
        except ExecutorError as exc:
            raise ConfigError(f"{exc}; or remove 'compute' to use this machine's cores") from None
    return config


def _dataset(name: str, raw: Any, base: Path) -> TableSource:
    """Raises:
    ConfigError: naming the field as `datasets.NAME.FIELD`."""
    try:
        source = TableSource.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(explain(exc, TableSource, f"datasets.{name}", "party config")) from None
    field = "password_file" if source.format == "sql" else "path"
    given = getattr(source, field)
    if given is None or Path(given).is_absolute():
        return source
    return source.model_copy(update={field: str(base / given)})
