"""Typed views of jobs for the Python API: a progress event while a job runs (`Progress`),
its outcome (`JobResult`), a line of the job list (`Job`), and the job with every field
of its result as the coordinator sends it (`JobView`: `Client.view`, `Client.views`, what
`vfl status` and `vfl watch` print). Frozen dataclasses built from the coordinator's
answers; states by name ("TRAINING", "SUCCEEDED")."""

from __future__ import annotations

from dataclasses import dataclass, field

from vfl.analysis import Analysis
from vfl.coordinator.client import ENDED, Job as Job, JobView as JobView
from vfl.models import drift_counts
from vfl.proto import coordinator_pb2 as pb

MAIN_METRICS = ("auc", "accuracy", "r2")  # the one a progress line shows, first found


@dataclass(frozen=True)
class Progress:
    """A job's progress as the coordinator reported it: its stage, the newest round of
    `total_rounds` (0 before training), loss and validation metrics so far."""

    job_id: str
    state: str
    round: int
    total_rounds: int
    loss: float | None
    metrics: dict[str, float]
    intersection_size: int

    @staticmethod
    def from_view(view: JobView) -> Progress:
        r = view.result
        return Progress(
            job_id=view.job_id,
            state=view.state,
            round=int(r.round),
            total_rounds=int(r.total_rounds),
            loss=r.loss if r.HasField("loss") else None,
            metrics=dict(r.metrics),
            intersection_size=int(r.intersection_size),
        )

    @property
    def ended(self) -> bool:
        """True once the job succeeded, failed or was cancelled."""
        return self.state in ENDED

    def __str__(self) -> str:
        """One line, e.g. "j-1a2b TRAINING round 12/40 loss=0.3123 auc=0.9876"."""
        parts = [self.job_id, self.state]
        if self.total_rounds:
            parts.append(f"round {self.round}/{self.total_rounds}")
        if self.loss is not None:
            parts.append(f"loss={self.loss:.4f}")
        shown = [k for k in MAIN_METRICS if k in self.metrics][:1]
        parts += [f"{k}={self.metrics[k]:.4f}" for k in shown]
        return " ".join(parts)


@dataclass(frozen=True)
class Validation:
    """One validation of a training job: after `round`, `seconds` into training."""

    round: int
    seconds: float
    metrics: dict[str, float]


@dataclass(frozen=True)
class Prediction:
    """What a prediction job scored: `scored` of the active party's `rows` (the others
    are `missing` at some party), written as `output` in its output folder; `drift`, per
    party, counts of its cells outside what its preprocessing was fitted on
    (out_of_range, unknown_categories, unexpected_missing); `stability`, per party, the
    population stability of its columns (and at the active party of the scores) against
    its training rows, as its config shares it (`vfl.v1.Stability`)."""

    model_id: str
    rows: int
    scored: int
    missing: int
    output: str
    drift: dict[str, dict[str, int]]
    stability: dict[str, pb.Stability] = field(default_factory=dict)


@dataclass(frozen=True)
class JobResult:
    """A job's outcome (or, for a job still running, its result so far).

    `reason` says why a job failed or was cancelled ("" otherwise); `metrics` is the
    newest validation of a training job, or a prediction job's own metrics, and
    `undefined_metrics` those of its metrics without a value, each with why (an AUC over
    rows of one class, a diverged loss); `rounds` and `seconds` count from launch to end.
    `evaluation`, of a binary task whose rows held both classes: KS, Gini, AUC, the lift
    and the calibration tables of the final validation, or of a prediction's rows when
    the active party holds their labels (`vfl.v1.Evaluation`); None otherwise.
    """

    job_id: str
    name: str
    state: str
    reason: str
    metrics: dict[str, float]
    rounds: int
    seconds: float
    intersection_size: int
    bytes_sent: int
    local_updates: int
    history: tuple[Validation, ...]
    prediction: Prediction | None
    undefined_metrics: dict[str, str] = field(default_factory=dict)
    evaluation: pb.Evaluation | None = None
    analysis: Analysis | None = None  # an analysis job (`Client.analyze`)

    @staticmethod
    def from_view(view: JobView) -> JobResult:
        r = view.result
        return JobResult(
            job_id=view.job_id,
            name=view.name,
            state=view.state,
            reason=view.reason,
            metrics=dict(r.metrics),
            rounds=int(r.rounds or r.round),
            seconds=r.seconds,
            intersection_size=int(r.intersection_size),
            bytes_sent=int(r.bytes_sent),
            local_updates=int(r.local_updates),
            history=tuple(Validation(int(h.round), h.seconds, dict(h.metrics)) for h in r.history),
            prediction=_prediction(r) if r.HasField("prediction") else None,
            undefined_metrics=dict(r.undefined_metrics),
            evaluation=r.evaluation if r.HasField("evaluation") else None,
            analysis=Analysis.from_proto(r.analysis) if r.HasField("analysis") else None,
        )

    @property
    def succeeded(self) -> bool:
        return self.state == "SUCCEEDED"

    @property
    def ended(self) -> bool:
        """True once the job succeeded, failed or was cancelled."""
        return self.state in ENDED


def _prediction(r: pb.JobResult) -> Prediction:
    p = r.prediction
    drift = {party: drift_counts(t.drift) for party, t in r.parties.items() if t.HasField("drift")}
    stability = {party: t.stability for party, t in r.parties.items() if t.HasField("stability")}
    return Prediction(
        p.model, int(p.rows), int(p.scored), int(p.missing), p.output, drift, stability
    )
