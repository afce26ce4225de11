"""Following a job: its stages as they begin, a live progress bar (round, loss, validation
metric) once training runs, and the result."""

from __future__ import annotations

import sys

from tqdm import tqdm
from vfl.coordinator.client import CoordinatorClient, JobView
from vfl.proto import coordinator_pb2 as pb, party_pb2
from vfl.watching import views

STAGES = {
    "SUBMITTED": "waiting for the parties",
    "QUEUED": "queued until its parties have room (their limits)",
    "ALIGNING": "aligning rows (private set intersection)",
    "KEYING": "generating Paillier keys and setting up the secure layers",
    "TRAINING": "training",
    "PREDICTING": "scoring with the stored model",
}


def _postfix(result: pb.JobResult) -> dict[str, str]:
    post = {}
    if result.HasField("loss"):
        post["loss"] = f"{result.loss:.4f}"
    prefix = "" if result.HasField("prediction") else "val_"  # a prediction's own metrics
    for key in ("auc", "accuracy", "r2"):
        if key in result.metrics:
            post[f"{prefix}{key}"] = f"{result.metrics[key]:.4f}"
            break
    return post


def follow(client: CoordinatorClient, job_id: str, show: bool = True) -> JobView:
    """Watch `job_id` until it ends (`vfl.watching.views`); on stderr when `show`, a line
    per stage and a progress bar while it trains.

    Raises:
        CoordinatorLost: the coordinator went away after the watch began (the stream
            broke, or ended before the job did).
        grpc.RpcError: the watch could not begin (unreachable, TLS handshake, no job).
    """
    bar: tqdm | None = None
    last: JobView | None = None
    try:
        for view in views(client, job_id):
            if show:
                bar = _show(job_id, view, last, bar)
            last = view
    finally:
        if bar is not None:
            bar.close()
    if last is None:  # `views` yields at least once
        raise AssertionError(f"no view of job {job_id}")
    return last


def _show(job_id: str, view: JobView, last: JobView | None, bar: tqdm | None) -> tqdm | None:
    """A line when a stage begins; the progress bar (made once rounds are known)."""
    if (last is None or view.state != last.state) and view.state in STAGES:
        _stage_line(job_id, view, bar)
    total = view.result.total_rounds
    if bar is None and total:
        bar = tqdm(total=total, desc=f"{job_id}", unit="round", file=sys.stderr, dynamic_ncols=True)
    if bar is not None:
        bar.n = int(view.result.round)
        bar.set_postfix(_postfix(view.result), refresh=False)
        bar.set_description_str(f"{job_id} {view.state.lower()}", refresh=False)
        bar.refresh()
    return bar


def _stage_line(job_id: str, view: JobView, bar: tqdm | None) -> None:
    line = f"{job_id}: {view.state} - {STAGES[view.state]}"
    if view.state in ("KEYING", "TRAINING", "PREDICTING") and view.result.intersection_size:
        line += f" ({view.result.intersection_size} common rows)"
    if view.state == "QUEUED" and view.reason:
        line += f": {view.reason}"
    if bar is not None:
        bar.write(line, file=sys.stderr)
    else:
        print(line, file=sys.stderr, flush=True)


def format_result(view: JobView) -> str:
    r = view.to_plain()
    lines = [f"job {view.job_id}: {view.state}"]
    if view.reason:
        lines.append(f"  reason: {view.reason}")
    p = r.get("prediction")
    if p:
        lines.append(
            f"  scored: {p.get('scored', 0)} of the active party's {p.get('rows', 0)} rows "
            f"({p.get('missing', 0)} missing at some party, not scored) with model {p['model']}"
        )
        lines.append(f"  scores: '{p.get('output', '')}' in the active party's output folder")
        for party, totals in view.result.parties.items():
            if totals.HasField("drift") and (text := drift_text(totals.drift)):
                lines.append(f"  {party}: {text.removeprefix('; ')}")
    if r.get("metrics"):
        label = "metrics" if p else "validation"
        lines.append(f"  {label}: " + ", ".join(f"{k}={v:.4f}" for k, v in r["metrics"].items()))
    for key in (
        "intersection_size",
        "psi_seconds",
        "rounds",
        "local_updates",
        "bytes_sent",
        "seconds",
    ):
        if r.get(key):  # progress so far: what a running job has not reached is left out
            lines.append(f"  {key}: {r[key]}")
    return "\n".join(lines)


def drift_text(drift: party_pb2.DriftCounts) -> str:
    """'; drift since: ...' when rows it scored left what its preprocessing was fitted on."""
    counts = {
        "out of range": drift.out_of_range,
        "unknown categories": drift.unknown_categories,
        "unexpected empty cells": drift.unexpected_missing,
    }
    shown = ", ".join(f"{n} {what}" for what, n in counts.items() if n)
    return f"; drift in scored rows: {shown}" if shown else ""
