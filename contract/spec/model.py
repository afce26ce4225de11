"""The job spec's models: `JobSpec` and its sections, each frozen and rejecting unknown
fields. Every field but `parties` has a default; bounds live on the fields, so the JSON
Schema (`vfl spec schema`) and the error messages both come from here."""

from __future__ import annotations

import hashlib
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, ValidationError, model_validator
from vfl.celu.config import LocalUpdateConfig
from vfl.contract.errors import SpecError
from vfl.contract.spec.crypto import CryptoSpec
from vfl.contract.spec.data import DataSpec
from vfl.contract.spec.features import FeaturesSpec, check_analysis
from vfl.contract.spec.fields import NUMBER, FieldProblem, Name, SpecModel
from vfl.contract.spec.messages import explain
from vfl.contract.spec.predict import PredictSpec
from vfl.contract.spec.trees import Task, TreesSpec, check_sections

ModelKindName = Literal["network", "trees"]
Protocol = Literal["split", "blindfl", "secureboost"]
KIND_PROTOCOLS: dict[ModelKindName, tuple[Protocol, ...]] = {
    "network": ("split", "blindfl"),
    "trees": ("split", "secureboost"),
}
LayerWidths = tuple[Annotated[int, Field(ge=1, le=65536, strict=True)], ...]


class PartySpec(SpecModel):
    id: Name = Field(description="the party's id, as in its certificate and config")
    role: Literal["active", "passive"] = Field(
        description="active: holds the label and the top model; passive: features only"
    )
    data: DataSpec


class SourceSpec(SpecModel):
    """Each party's bottom model (split) or source layer (blindfl)."""

    out_dim: int = Field(16, ge=1, le=4096, strict=True, description="width of the cut layer")
    hidden: LayerWidths = Field((), description="hidden layer widths, e.g. [64], or []")
    embedding_dim: int = Field(
        8, ge=1, le=1024, strict=True, description="embedding width per categorical column"
    )
    lr: Annotated[float, Field(gt=0, le=100, strict=True), NUMBER] | None = Field(
        None,
        description="blindfl source-layer rate eta (its steps follow train.optimizer, "
        "preconditioned: docs/protocols.md §4); null: train.lr",
    )


class TopSpec(SpecModel):
    """The active party's top model."""

    hidden: LayerWidths = Field((32,), description="hidden layer widths, e.g. [32], or []")
    task: Task = "binary"


class ModelSpec(SpecModel):
    """The model a job trains. Its kind follows from the section: `network` (each party's
    `source`, the active party's `top`; the default) or `trees` (`trees: {...}`, a
    gradient-boosted ensemble); `kind` answers it, and `KIND_PROTOCOLS` lists the
    protocols each runs under (docs/architecture.md, "Adding a model kind")."""

    source: SourceSpec = Field(default_factory=SourceSpec)
    top: TopSpec = Field(default_factory=TopSpec)
    trees: TreesSpec | None = Field(
        None,
        description="a gradient-boosted tree ensemble instead of a network, e.g. "
        "trees: {count: 50, depth: 5, task: binary}",
    )

    @model_validator(mode="after")
    def _one_kind(self) -> ModelSpec:
        # a section that differs from its defaults (the canonical JSON holds all three)
        networks = [
            name
            for name, given, default in (
                ("source", self.source, SourceSpec()),
                ("top", self.top, TopSpec()),
            )
            if given != default
        ]
        if self.trees is not None and networks:
            raise FieldProblem(
                "trees",
                f"cannot go with {' and '.join(networks)} (those shape a network); give "
                "either trees: {...} or the network's sections",
            )
        return self

    @property
    def kind(self) -> ModelKindName:
        """The family of this model: what every party asks its roles, parts and scoring of
        (`party.kinds.kind_of`)."""
        return "network" if self.trees is None else "trees"

    @property
    def task(self) -> Task:
        """What the model predicts, whatever its kind."""
        return self.top.task if self.trees is None else self.trees.task


class TrainSpec(SpecModel):
    epochs: int = Field(3, ge=1, le=100_000, strict=True)
    batch_size: int = Field(256, ge=1, le=1 << 20, strict=True)
    lr: Annotated[float, Field(gt=0, le=100, strict=True), NUMBER] = Field(
        0.05, description="learning rate (numbers such as 1e-3 welcome)"
    )
    optimizer: Literal["adagrad", "sgd", "adam"] = "adagrad"
    seed: int = Field(0, ge=0, le=2**31 - 1, strict=True)
    timeout_s: Annotated[float, Field(ge=1, le=86400, strict=True), NUMBER] = Field(
        300.0, description="how long a party waits for a peer's message"
    )
    checkpoint_every: int | None = Field(
        None,
        ge=0,
        strict=True,
        description="checkpoint every N rounds (and at the end); default: once per epoch "
        "and at the end; 0: never",
    )


class ValidationSpec(SpecModel):
    fraction: Annotated[float, Field(gt=0, le=0.9, strict=True), NUMBER] = Field(
        0.2, description="training rows held out to validate on (without test data)"
    )
    every: int | None = Field(
        None,
        ge=1,
        strict=True,
        description="validate every N rounds and at the end; default: every 20 rounds, or "
        "less often on large tables, so that validating takes at most about a quarter of "
        "the training time (split: every validation rows / (4 batch_size) rounds; "
        "blindfl: every 3 validation rows / batch_size rounds)",
    )


class NetworkSpec(SpecModel):
    """An emulated WAN on every data-plane envelope: a job's `network:`, or the flags of
    `vfl party serve` (`party.transport.wan.ShapedChannel`)."""

    # from 10 kbit/s: below it one envelope's serialisation time outgrows any job (and at
    # 1e-300, a sleep of 1e300 s overflowed)
    bandwidth_mbps: Annotated[float, Field(ge=0.01, le=1e6, strict=True), NUMBER] = Field(
        description="link bandwidth in Mbit/s, from 0.01 to 1000000, e.g. "
        "network: {bandwidth_mbps: 20, rtt_ms: 50}"
    )
    rtt_ms: Annotated[float, Field(ge=0, le=60000, strict=True), NUMBER] = Field(
        0.0, description="round-trip time in milliseconds, from 0 to 60000"
    )

    def serialisation_s(self, size: int) -> float:
        """Seconds an envelope of `size` bytes occupies the link."""
        return size * 8 / (self.bandwidth_mbps * 1e6)


class DefenceSpec(SpecModel):
    """An optional defence of `protocol: split` against label inference by the passive
    parties (docs/security.md, "A defence for split"): a trade-off between accuracy and
    what the derivatives reveal, not security. Either or both."""

    label_epsilon: Annotated[float, Field(gt=0, le=50, strict=True), NUMBER] | None = Field(
        None,
        description="randomised response on the active party's training labels, epsilon-"
        "label-DP: each binary label is flipped once, with probability 1 / (1 + e^epsilon)",
    )
    gradient_noise: Annotated[float, Field(gt=0, le=1000, strict=True), NUMBER] | None = Field(
        None,
        description="Gaussian noise added to each derivative sent to a passive party, its "
        "standard deviation this many times the batch's root mean square derivative",
    )


class JobSpec(SpecModel):
    """A vertical federated learning job: who takes part with which rows, and how to train."""

    model_config = ConfigDict(title="vfl job spec")

    job: Name = Field("job", description="the job's name")
    parties: tuple[PartySpec, ...] = Field(
        description="one active party, which holds the label, and at least one passive party",
        json_schema_extra={"minItems": 2},
    )
    model: ModelSpec = Field(default_factory=ModelSpec)
    protocol: Protocol = Field(
        "split",
        description="split: plaintext split learning (networks) or plaintext gradients "
        "(trees); blindfl: secure source layers (networks); secureboost: encrypted "
        "gradients and histograms (trees)",
    )
    local_updates: LocalUpdateConfig = Field(default_factory=LocalUpdateConfig)
    train: TrainSpec = Field(default_factory=TrainSpec)
    validation: ValidationSpec = Field(default_factory=ValidationSpec)
    network: NetworkSpec | None = Field(None, description="emulate a WAN (benchmarks)")
    crypto: CryptoSpec = Field(default_factory=CryptoSpec)
    defence: DefenceSpec | None = Field(
        None, description="split only: label-DP randomised response and/or gradient noise"
    )
    predict: PredictSpec | None = Field(
        None, description="set by the coordinator: score with a stored model, do not train"
    )
    features: FeaturesSpec = Field(
        default_factory=FeaturesSpec,
        description="WOE/IV bins per column, and the columns a training job keeps by IV",
    )
    analyze: bool = Field(
        False,
        strict=True,
        description="set by `vfl analyze`: measure every column's WOE and IV, train nothing",
    )

    @model_validator(mode="after")
    def _parties_fit(self) -> JobSpec:
        _check_parties(self.parties)
        has = [
            p.data.test_dataset is not None or p.data.test_path is not None for p in self.parties
        ]
        if any(has) and not all(has):
            raise ValueError(
                "either every party names its test rows (data.test_dataset or data.test_path) "
                "or none does (then validation.fraction of the rows is held out)"
            )
        if self.protocol not in KIND_PROTOCOLS[self.model.kind]:
            raise FieldProblem(
                "protocol",
                f"is {self.protocol}: a {self.model.kind} model trains under "
                f"{' or '.join(KIND_PROTOCOLS[self.model.kind])}",
            )
        if self.model.kind == "trees":
            check_sections(self.defence is not None, self.local_updates.mode, self.crypto.scheme)
        if self.defence is not None and self.protocol != "split":
            raise FieldProblem(
                "defence", "is for protocol: split (blindfl's passive parties see no derivative)"
            )
        if self.crypto.scheme == "bfv":
            _check_bfv(self)
        check_analysis(self.analyze, self.features, self.model.task, self.predict is not None)
        if self.defence is not None and self.defence.label_epsilon is not None:
            if self.model.task != "binary":
                raise FieldProblem("defence", "label_epsilon needs model.top.task: binary")
        return self

    @property
    def active(self) -> PartySpec:
        return next(p for p in self.parties if p.role == "active")

    @property
    def passives(self) -> tuple[PartySpec, ...]:
        return tuple(p for p in self.parties if p.role == "passive")

    def party(self, party_id: str) -> PartySpec:
        """Raises:
        SpecError: the job names no such party."""
        for p in self.parties:
            if p.id == party_id:
                return p
        raise SpecError(f"party '{party_id}' is not named in job '{self.job}'")

    def with_data(self, party_id: str, data: DataSpec) -> JobSpec:
        """This spec with party `party_id` reading `data` (e.g. a file made a dataset)."""
        parties = tuple(
            p.model_copy(update={"data": data}) if p.id == party_id else p for p in self.parties
        )
        return self.model_copy(update={"parties": parties})

    def for_prediction(self, request: PredictSpec) -> JobSpec:
        """The job that scores `request.data` with the model this spec trained.

        Raises:
            SpecError: `request.data` does not name every party of the model, or names
                another.
        """
        ids = [p.id for p in self.parties]
        unknown = sorted(set(request.data) - set(ids))
        missing = [pid for pid in ids if pid not in request.data]
        if unknown or missing:
            raise SpecError(
                f"model {request.model} was trained by parties {ids}: name one dataset for "
                f"each of them (--data PARTY=DATASET)"
                + (f"; missing: {missing}" if missing else "")
                + (f"; not in the model: {unknown}" if unknown else "")
            )
        parties = tuple(
            p.model_copy(update={"data": _scoring_data(p.data, request.data[p.id])})
            for p in self.parties
        )
        return self.model_copy(
            update={
                "job": f"{self.job}-predict"[:64],
                "parties": parties,
                "validation": ValidationSpec(),
                "predict": request,
            }
        )

    def to_json(self) -> str:
        """The canonical JSON every process receives (`spec_json` on the wire and in the
        job store); `from_json` reads it back."""
        return self.model_dump_json()

    def spec_hash(self) -> str:
        """SHA-256 of the canonical JSON: checkpoints of one job under one spec share it."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()

    @classmethod
    def from_json(cls, text: str | bytes) -> JobSpec:
        """Raises:
        SpecError: the text is not JSON or not a valid spec."""
        try:
            return cls.model_validate_json(text)
        except ValidationError as exc:
            raise SpecError(explain(exc, cls)) from None


def _scoring_data(trained: DataSpec, dataset: str) -> DataSpec:
    """`dataset` read with the column settings the job trained with (its label column is
    the dataset's own: rows to score may carry none)."""
    kept = {k: v for k, v in trained.given().items() if k in ("format", "id", "categorical")}
    return DataSpec(dataset=dataset, **kept)


def _check_parties(parties: tuple[PartySpec, ...]) -> None:
    if len(parties) < 2:
        raise FieldProblem("parties", "must list one active party and at least one passive party")
    ids = [p.id for p in parties]
    if len(set(ids)) != len(ids):
        raise FieldProblem("parties", f"has duplicate ids {ids}; give every party a distinct id")
    roles = [p.role for p in parties]
    if roles.count("active") != 1 or "passive" not in roles:
        raise FieldProblem(
            "parties",
            "needs exactly one party with role: active (it holds the label) and at least one "
            f"with role: passive; got roles {roles}",
        )
    for i, p in enumerate(parties):
        if p.role == "active" and p.data.path is not None and not p.data.label:
            raise FieldProblem(
                f"parties[{i}].data.label",
                "is required: the active party's 'data.label' must name its label column",
            )
        if p.role == "passive" and p.data.label:
            raise FieldProblem(
                f"parties[{i}].data.label", "must be left out: only the active party holds a label"
            )


def _check_bfv(spec: JobSpec) -> None:
    """What `crypto.scheme: bfv` supports so far (issue 39's first slice)."""
    if spec.protocol != "blindfl":
        raise FieldProblem("crypto", "scheme: bfv is for protocol: blindfl")
    if len(spec.parties) != 2:
        raise FieldProblem(
            "crypto", "scheme: bfv takes one passive party for now; use scheme: paillier"
        )
    if spec.local_updates.mode != "none":
        raise FieldProblem(
            "crypto", "scheme: bfv runs without local updates for now (local_updates.mode: none)"
        )
