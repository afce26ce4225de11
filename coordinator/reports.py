"""Party reports: checked, then folded into the job's typed result.

A party reports the stages it reaches, PSI's outcome, rounds, validations, and how it
ended (`vfl.v1.ReportProgressRequest`, one message per event). `apply_report` turns one
report into the job's next result and, where the report ends the job, its end state.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass

from vfl.contract.spec import JobSpec
from vfl.contract.states import FAILED, PAUSED, RUNNING, SUCCEEDED, JobState, state_name
from vfl.coordinator.analysis import merge_analysis
from vfl.coordinator.errors import CoordinatorError
from vfl.proto import coordinator_pb2 as pb

EVENTS = ("stage", "aligned", "round", "validation", "done", "failed", "checkpoint", "stopping")


@dataclass(frozen=True)
class Outcome:
    """What a report changes: the result to store, and a state to move to (or None)."""

    result: pb.JobResult
    state: JobState | None = None
    reason: str = ""


def check_report(request: pb.ReportProgressRequest) -> str:
    """The report's event name, once the report is well formed. Metrics and a loss that
    are not finite are no reason to refuse it (`apply_report` keeps them as undefined): a
    refused report would leave its job waiting for it.

    Raises:
        CoordinatorError: no event, a stage a party cannot report, or a report time that is
            not a finite number.
    """
    event = request.WhichOneof("event")
    if event is None:
        raise CoordinatorError(f"a progress report needs one of the events {EVENTS}")
    if event == "stage" and request.stage.state not in RUNNING:
        allowed = sorted(state_name(s) for s in RUNNING)
        raise CoordinatorError(
            f"a party reports one of the stages {allowed}, not {request.stage.state}"
        )
    if not math.isfinite(request.queued_seconds) or request.queued_seconds < 0:
        raise CoordinatorError("a report's queued_seconds must be a finite number >= 0")
    return event


def apply_report(
    result: pb.JobResult, spec: JobSpec, party_id: str, request: pb.ReportProgressRequest
) -> Outcome:
    """Fold one checked report of `party_id` into a copy of `result`."""
    new = pb.JobResult()
    new.CopyFrom(result)
    event = request.WhichOneof("event")
    active = party_id == spec.active.id
    if event == "stage":
        return Outcome(new, request.stage.state if active else None)
    if event == "aligned" and active:
        new.intersection_size = request.aligned.intersection_size
        new.psi_seconds = request.aligned.psi_seconds
    elif event == "round" and active:  # progress is the active party's
        new.round, new.total_rounds = request.round.round, request.round.total_rounds
        if request.round.HasField("loss") and math.isfinite(request.round.loss):
            new.loss = request.round.loss
    elif event == "validation":
        seconds = round(happened(new, request) - (new.started_at or time.time()), 3)
        metrics = _newest_metrics(new, request.validation.metrics, request.validation.undefined)
        new.history.add(round=request.validation.round, seconds=seconds, metrics=metrics)
    elif event == "done":
        return _party_done(new, spec, party_id, request.done, happened(new, request))
    elif event == "failed":  # for a problem its operator can mend, the job pauses
        state = PAUSED if request.failed.pause else FAILED
        return Outcome(new, state, request.failed.reason or f"party '{party_id}' failed")
    elif event == "checkpoint":
        new.checkpoints[party_id] = max(new.checkpoints[party_id], request.checkpoint.round)
        new.checkpoint_round = min(new.checkpoints.get(p.id, 0) for p in spec.parties)
    return Outcome(new)


def _newest_metrics(
    result: pb.JobResult, metrics: Mapping[str, float], undefined: Mapping[str, str]
) -> dict[str, float]:
    """Make `metrics` the result's newest validation: its numbers in `metrics`, and in
    `undefined_metrics` those without a value, with why (a metric a party sent as NaN or
    infinite counts as undefined too). Returns the numbers."""
    numbers = {k: v for k, v in metrics.items() if math.isfinite(v)}
    why = dict(undefined)
    why.update({k: f"not finite ({v})" for k, v in metrics.items() if not math.isfinite(v)})
    result.metrics.clear()
    result.metrics.update(numbers)
    result.undefined_metrics.clear()
    result.undefined_metrics.update(why)
    return numbers


def happened(result: pb.JobResult, request: pb.ReportProgressRequest) -> float:
    """When the report's event happened, by this clock: its arrival (now) less the time
    it waited at the party (the coordinator was down), but not before the job started."""
    now = time.time()
    return max(now - request.queued_seconds, min(result.started_at or now, now))


def _party_done(
    result: pb.JobResult, spec: JobSpec, party_id: str, done: pb.PartyDone, ended_at: float
) -> Outcome:
    result.parties[party_id].CopyFrom(
        pb.PartyTotals(
            bytes_sent=done.bytes_sent,
            seconds=done.seconds,
            local_updates=done.local_updates,
            drift=done.drift if done.HasField("drift") else None,
            stability=done.stability if done.HasField("stability") else None,
            ended_at=ended_at,
        )
    )
    if party_id == spec.active.id:
        result.rounds, result.local_updates = done.rounds, done.local_updates
        _newest_metrics(result, done.metrics, done.undefined)
        del result.history[:]
        result.history.extend(done.history)
        for point in result.history:  # a curve holds numbers only
            for name in [k for k, v in point.metrics.items() if not math.isfinite(v)]:
                del point.metrics[name]
        if done.HasField("prediction"):
            result.prediction.CopyFrom(done.prediction)
        if done.HasField("evaluation"):
            result.evaluation.CopyFrom(done.evaluation)
    if done.HasField("analysis"):
        merge_analysis(result, spec, party_id, done.analysis)
    result.bytes_sent = sum(p.bytes_sent for p in result.parties.values())
    if set(result.parties) != {p.id for p in spec.parties}:
        return Outcome(result)
    ended = max(p.ended_at for p in result.parties.values())  # the last party's end
    result.seconds = round(ended - (result.started_at or ended), 3)
    return Outcome(result, SUCCEEDED)
