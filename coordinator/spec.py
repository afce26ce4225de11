"""The job spec: a YAML file a person writes, parsed into frozen dataclasses.

Every field has a default except `parties`. Unknown fields, wrong types and impossible
values raise `SpecError` naming the field (as a dotted path) and the fix. The parsed spec
travels to parties as JSON (`to_json` / `from_json`), never pickled.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from coordinator import spec_fields as F
from coordinator.errors import SpecError

PROTOCOLS = ("split", "blindfl")
TASKS = ("binary", "multiclass", "regression")
OPTIMIZERS = ("adagrad", "sgd", "adam")
FORMATS = ("csv", "libsvm")


@dataclass(frozen=True)
class DataSpec:
    """Where a party's rows come from: a dataset its daemon exposes, or a path (`vfl run`)."""

    dataset: str | None = None
    path: str | None = None
    format: str | None = None
    id: str | None = None
    label: str | None = None
    categorical: tuple[str, ...] | None = None
    test_dataset: str | None = None  # held-out rows to validate on (instead of a fraction)
    test_path: str | None = None


@dataclass(frozen=True)
class PartySpec:
    id: str
    role: str
    data: DataSpec


@dataclass(frozen=True)
class SourceSpec:
    out_dim: int = 16
    hidden: tuple[int, ...] = ()
    embedding_dim: int = 8  # per categorical field
    lr: float | None = None  # blindfl source-layer SGD rate; defaults to train.lr


@dataclass(frozen=True)
class TopSpec:
    hidden: tuple[int, ...] = (32,)
    task: str = "binary"


@dataclass(frozen=True)
class ModelSpec:
    source: SourceSpec = field(default_factory=SourceSpec)
    top: TopSpec = field(default_factory=TopSpec)


@dataclass(frozen=True)
class LocalUpdatesSpec:
    """`none` (vanilla), `fedbcd` (steps = Q) or `celu` (workset W, reuse R, threshold xi).

    `schedule: async` (default) runs CELU updates in a background worker that overlaps the
    network; `sync` runs up to `steps` of them after each round, deterministically.
    """

    mode: str = "none"
    steps: int = 5
    workset: int = 5
    reuse: int = 5
    xi: float | None = 0.5
    schedule: str = "async"


@dataclass(frozen=True)
class TrainSpec:
    epochs: int = 3
    batch_size: int = 256
    lr: float = 0.05
    optimizer: str = "adagrad"
    seed: int = 0
    timeout_s: float = 300.0


@dataclass(frozen=True)
class ValidationSpec:
    fraction: float = 0.2
    every: int = 20


@dataclass(frozen=True)
class CryptoSpec:
    """Paillier settings of `protocol: blindfl`. Keys below 2048 bits need the explicitly
    named test setting `allow_insecure_test_keys: true` (daemons log a warning)."""

    key_bits: int = 2048
    allow_insecure_test_keys: bool = False


@dataclass(frozen=True)
class NetworkSpec:
    """An emulated WAN applied to every data-plane envelope (benchmarks)."""

    bandwidth_mbps: float
    rtt_ms: float = 0.0


@dataclass(frozen=True)
class JobSpec:
    job: str
    parties: tuple[PartySpec, ...]
    model: ModelSpec = field(default_factory=ModelSpec)
    protocol: str = "split"
    local_updates: LocalUpdatesSpec = field(default_factory=LocalUpdatesSpec)
    train: TrainSpec = field(default_factory=TrainSpec)
    validation: ValidationSpec = field(default_factory=ValidationSpec)
    network: NetworkSpec | None = None
    crypto: CryptoSpec = field(default_factory=CryptoSpec)

    @property
    def active(self) -> PartySpec:
        return next(p for p in self.parties if p.role == "active")

    @property
    def passives(self) -> tuple[PartySpec, ...]:
        return tuple(p for p in self.parties if p.role == "passive")

    def party(self, party_id: str) -> PartySpec:
        for p in self.parties:
            if p.id == party_id:
                return p
        raise SpecError(f"party '{party_id}' is not named in job '{self.job}'")

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @staticmethod
    def from_json(text: str) -> JobSpec:
        return parse_spec(json.loads(text))

    def with_data(self, party_id: str, data: DataSpec) -> JobSpec:
        parties = tuple(
            dataclasses.replace(p, data=data) if p.id == party_id else p for p in self.parties
        )
        return dataclasses.replace(self, parties=parties)


def load_spec(path: str | Path) -> JobSpec:
    """Read and validate a job spec file; relative data paths resolve against its folder.

    Raises:
        SpecError: the file is missing, is not YAML, or fails validation.
    """
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"job spec '{path}' does not exist; pass the path of a YAML job file")
    spec = parse_spec_text(p.read_text())
    return _resolve_paths(spec, p.resolve().parent)


def parse_spec_text(text: str) -> JobSpec:
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SpecError(f"job spec is not valid YAML: {exc}") from exc
    return parse_spec(raw)


def parse_spec(raw: Any) -> JobSpec:
    """Validate a decoded spec (dict) and build the frozen `JobSpec`."""
    if not isinstance(raw, dict):
        raise SpecError("job spec must be a YAML mapping with at least 'job' and 'parties'")
    top = F.fields(
        raw,
        "",
        {
            "job",
            "parties",
            "model",
            "protocol",
            "local_updates",
            "train",
            "validation",
            "network",
            "crypto",
        },
    )
    if "parties" not in top:
        raise SpecError("'parties' is required: list one active party and at least one passive")
    spec = JobSpec(
        job=F.name(top.get("job", "job"), "job"),
        parties=_parties(top["parties"]),
        model=_model(top.get("model") or {}),
        protocol=F.choice(top.get("protocol", "split"), "protocol", PROTOCOLS),
        local_updates=_local_updates(top.get("local_updates") or {}),
        train=_train(top.get("train") or {}),
        validation=_validation(top.get("validation") or {}),
        network=None if top.get("network") is None else _network(top["network"]),
        crypto=_crypto(top.get("crypto") or {}),
    )
    _check_test_data(spec)
    return spec


def _resolve_paths(spec: JobSpec, base: Path) -> JobSpec:
    for p in spec.parties:
        changes = {
            key: str(base / value)
            for key in ("path", "test_path")
            if (value := getattr(p.data, key)) and not Path(value).is_absolute()
        }
        if changes:
            spec = spec.with_data(p.id, dataclasses.replace(p.data, **changes))
    return spec


def _parties(raw: Any) -> tuple[PartySpec, ...]:
    if not isinstance(raw, list) or len(raw) < 2:
        raise SpecError("'parties' must list one active party and at least one passive party")
    parties = tuple(_party(p, f"parties[{i}]") for i, p in enumerate(raw))
    ids = [p.id for p in parties]
    if len(set(ids)) != len(ids):
        raise SpecError(f"'parties' has duplicate ids {ids}; give every party a distinct id")
    roles = [p.role for p in parties]
    if roles.count("active") != 1 or "passive" not in roles:
        raise SpecError(
            "'parties' needs exactly one party with role: active (it holds the label) and at "
            f"least one with role: passive; got roles {roles}"
        )
    active = parties[roles.index("active")]
    if active.data.path is not None and not active.data.label:
        raise SpecError("the active party's 'data.label' must name its label column")
    for i, p in enumerate(parties):
        if p.role == "passive" and p.data.label:
            raise SpecError(f"'parties[{i}].data.label': only the active party holds a label")
    return parties


def _party(raw: Any, where: str) -> PartySpec:
    r = F.fields(raw, where, {"id", "role", "data"})
    for key in ("id", "role", "data"):
        if key not in r:
            raise SpecError(f"'{where}.{key}' is required")
    return PartySpec(
        id=F.name(r["id"], f"{where}.id"),
        role=F.choice(r["role"], f"{where}.role", ("active", "passive")),
        data=_data(r["data"], f"{where}.data"),
    )


def _data(raw: Any, where: str) -> DataSpec:
    r = F.fields(
        raw,
        where,
        {"dataset", "path", "format", "id", "label", "categorical", "test_dataset", "test_path"},
    )
    r = {k: v for k, v in r.items() if v is not None}
    if ("dataset" in r) == ("path" in r):
        raise SpecError(
            f"'{where}' needs exactly one of 'dataset' (a name the party's config exposes) "
            "or 'path' (a file; only for `vfl run`)"
        )
    fmt = r.get("format")
    if fmt is not None:
        F.choice(fmt, f"{where}.format", FORMATS)
    if "test_dataset" in r and "path" in r or "test_path" in r and "dataset" in r:
        raise SpecError(f"'{where}': pair 'dataset' with 'test_dataset', 'path' with 'test_path'")
    for key in ("dataset", "path", "id", "label", "test_dataset", "test_path"):
        if key in r and (not isinstance(r[key], str | int | bool) or r[key] == ""):
            raise SpecError(f"'{where}.{key}' must be a non-empty string; got {r[key]!r}")
    label = r.get("label")
    if label is True:
        label = "true"
    if label is False:
        label = None
    return DataSpec(
        dataset=None if "dataset" not in r else str(r["dataset"]),
        path=None if "path" not in r else str(r["path"]),
        format=fmt,
        id=None if "id" not in r else str(r["id"]),
        label=None if label is None else str(label),
        test_dataset=None if "test_dataset" not in r else str(r["test_dataset"]),
        test_path=None if "test_path" not in r else str(r["test_path"]),
        categorical=F.names(r["categorical"], f"{where}.categorical")
        if "categorical" in r
        else None,
    )


def _model(raw: Any) -> ModelSpec:
    r = F.fields(raw, "model", {"source", "top"})
    src = F.fields(
        r.get("source") or {}, "model.source", {"out_dim", "hidden", "embedding_dim", "lr"}
    )
    top = F.fields(r.get("top") or {}, "model.top", {"hidden", "task"})
    return ModelSpec(
        source=SourceSpec(
            out_dim=F.integer(src.get("out_dim", 16), "model.source.out_dim", 1, 4096),
            hidden=F.int_list(src.get("hidden", []), "model.source.hidden"),
            embedding_dim=F.integer(
                src.get("embedding_dim", 8), "model.source.embedding_dim", 1, 1024
            ),
            lr=None
            if src.get("lr") is None
            else F.number(src["lr"], "model.source.lr", 0.0, 100.0, open_lo=True),
        ),
        top=TopSpec(
            hidden=F.int_list(top.get("hidden", [32]), "model.top.hidden"),
            task=F.choice(top.get("task", "binary"), "model.top.task", TASKS),
        ),
    )


def _local_updates(raw: Any) -> LocalUpdatesSpec:
    from celu.config import LocalUpdateConfig
    from celu.errors import CeluError

    r = dict(F.fields(raw, "local_updates", {f.name for f in dataclasses.fields(LocalUpdatesSpec)}))
    r.setdefault("mode", "none")
    if r.get("mode") != "celu":
        r.setdefault("schedule", "sync")
    try:
        cfg = LocalUpdateConfig.from_mapping({**dataclasses.asdict(LocalUpdatesSpec()), **r})
    except CeluError as exc:
        raise SpecError(str(exc)) from exc
    return LocalUpdatesSpec(
        **{f.name: getattr(cfg, f.name) for f in dataclasses.fields(LocalUpdatesSpec)}
    )


def _train(raw: Any) -> TrainSpec:
    r = F.fields(raw, "train", {"epochs", "batch_size", "lr", "optimizer", "seed", "timeout_s"})
    return TrainSpec(
        epochs=F.integer(r.get("epochs", 3), "train.epochs", 1, 100000),
        batch_size=F.integer(r.get("batch_size", 256), "train.batch_size", 1, 1 << 20),
        lr=F.number(r.get("lr", 0.05), "train.lr", 0.0, 100.0, open_lo=True),
        optimizer=F.choice(r.get("optimizer", "adagrad"), "train.optimizer", OPTIMIZERS),
        seed=F.integer(r.get("seed", 0), "train.seed", 0, 2**31 - 1),
        timeout_s=F.number(r.get("timeout_s", 300.0), "train.timeout_s", 1.0, 86400.0),
    )


def _validation(raw: Any) -> ValidationSpec:
    r = F.fields(raw, "validation", {"fraction", "every"})
    return ValidationSpec(
        fraction=F.number(r.get("fraction", 0.2), "validation.fraction", 0.0, 0.9, open_lo=True),
        every=F.integer(r.get("every", 20), "validation.every", 1),
    )


def _network(raw: Any) -> NetworkSpec:
    r = F.fields(raw, "network", {"bandwidth_mbps", "rtt_ms"})
    if "bandwidth_mbps" not in r:
        raise SpecError(
            "'network.bandwidth_mbps' is required, e.g. network: {bandwidth_mbps: 20, rtt_ms: 50}"
        )
    return NetworkSpec(
        bandwidth_mbps=F.number(
            r["bandwidth_mbps"], "network.bandwidth_mbps", 0.0, 1e6, open_lo=True
        ),
        rtt_ms=F.number(r.get("rtt_ms", 0.0), "network.rtt_ms", 0.0, 60000.0),
    )


def _crypto(raw: Any) -> CryptoSpec:
    r = F.fields(raw, "crypto", {"key_bits", "allow_insecure_test_keys"})
    insecure = r.get("allow_insecure_test_keys", False)
    if not isinstance(insecure, bool):
        raise SpecError("'crypto.allow_insecure_test_keys' must be true or false")
    bits = F.integer(r.get("key_bits", 2048), "crypto.key_bits", 512, 8192)
    if bits < 2048 and not insecure:
        raise SpecError(
            f"'crypto.key_bits' is {bits}: keys below 2048 bits are insecure; use 2048 or more, "
            "or for tests only set crypto.allow_insecure_test_keys: true"
        )
    return CryptoSpec(key_bits=bits, allow_insecure_test_keys=insecure)


def _check_test_data(spec: JobSpec) -> None:
    has = [bool(p.data.test_dataset or p.data.test_path) for p in spec.parties]
    if any(has) and not all(has):
        raise SpecError(
            "either every party names its test rows (data.test_dataset or data.test_path) "
            "or none does (then validation.fraction of the rows is held out)"
        )
