"""Following a job: its stages as they begin, a live progress bar (round, loss, validation
metric) once training runs, and the result."""

from __future__ import annotations

import sys
from collections.abc import Mapping

from tqdm import tqdm
from vfl.models import drift_counts
from vfl.proto import coordinator_pb2 as pb
from vfl.results import JobView
from vfl.watching import Followable, follow as follow_views

STAGES = {
    "SUBMITTED": "waiting for the parties",
    "QUEUED": "queued until its parties have room (their limits)",
    "ALIGNING": "aligning rows (private set intersection)",
    "KEYING": "generating Paillier keys and setting up the secure layers",
    "TRAINING": "training",
    "PREDICTING": "scoring with the stored model",
    "ANALYZING": "binning every column, counting events per bin (WOE and IV)",
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


def follow(client: Followable, job_id: str, show: bool = True) -> JobView:
    """Watch `job_id` until it ends (`vfl.watching.follow`: `client` is a `vfl.Client`);
    on stderr when `show`, a line per stage and a progress bar while it trains.

    Raises:
        CoordinatorLost: the coordinator went away after the watch began (the stream
            broke, or ended before the job did).
        UnknownJob, CoordinatorUnavailable: the watch could not begin (no job,
            unreachable, TLS handshake).
    """
    bar: tqdm | None = None
    last: JobView | None = None

    def each(view: JobView) -> None:
        nonlocal bar, last
        if show:
            bar = _show(job_id, view, last, bar)
        last = view

    try:
        return follow_views(client, job_id, each)
    finally:
        if bar is not None:
            bar.close()


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
    running = ("KEYING", "TRAINING", "PREDICTING", "ANALYZING")
    if view.state in running and view.result.intersection_size:
        line += f" ({view.result.intersection_size} common rows)"
    if view.state == "QUEUED" and view.reason:
        line += f": {view.reason}"
    if bar is not None:
        bar.write(line, file=sys.stderr)
    else:
        print(line, file=sys.stderr, flush=True)


def format_result(view: JobView, bins: bool = False) -> str:
    """A job's result as `vfl status` prints it (an analysis job: a table per party, with
    every column's `bins` if asked)."""
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
            if totals.HasField("drift") and (text := drift_text(drift_counts(totals.drift))):
                lines.append(f"  {party}: {text.removeprefix('; ')}")
            if totals.HasField("stability"):
                lines.append(f"  {party}: {stability_text(totals.stability)}")
    if r.get("metrics"):
        label = "metrics" if p else "validation"
        lines.append(f"  {label}: " + ", ".join(f"{k}={v:.4f}" for k, v in r["metrics"].items()))
    for name, why in r.get("undefined_metrics", {}).items():
        lines.append(f"  {name}: undefined: {why}")
    if view.result.HasField("evaluation"):
        lines += evaluation_lines(view.result.evaluation)
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
    if view.result.HasField("analysis"):
        from vfl.analysis import Analysis
        from vfl.cli.analyze import format_analysis

        lines.append(format_analysis(Analysis.from_proto(view.result.analysis), bins))
    return "\n".join(lines)


DRIFT = {
    "out_of_range": "out of range",
    "unknown_categories": "unknown categories",
    "unexpected_missing": "unexpected empty cells",
}


def drift_text(drift: Mapping[str, int]) -> str:
    """'; drift in scored rows: ...' when rows a party scored left what its preprocessing
    was fitted on (`drift`: its counts by name, `vfl.models.drift_counts`)."""
    shown = ", ".join(f"{drift[name]} {what}" for name, what in DRIFT.items() if drift.get(name))
    return f"; drift in scored rows: {shown}" if shown else ""


def stability_text(s: pb.Stability) -> str:
    """A party's population stability in one line: its columns at watch and at shift
    (each, where its config shares them), and the scores' index."""
    text = f"stability of {s.columns} columns: {s.watch} at watch (0.1+), {s.shift} shifted (0.25+)"
    moved = [c for c in s.shared if c.level != "stable"]
    if moved:
        text += " (" + ", ".join(f"{c.column} {c.index:.3f} {c.level}" for c in moved) + ")"
    if s.HasField("scores"):
        text += f"; scores {s.scores.index:.3f} {s.scores.level}"
    return text


def evaluation_lines(e: pb.Evaluation) -> list[str]:
    """KS, Gini and AUC, then the lift and calibration tables, as `vfl` prints them."""
    lines = [
        f"  evaluation over {e.rows} rows ({e.events} events): KS {e.ks:.4f}, "
        f"Gini {e.gini:.4f}, AUC {e.auc:.4f}",
        "    band   rows  events  event rate  cum. events  lift   mean p  scores",
    ]
    for b, c in zip(e.lift, e.calibration, strict=True):
        lines.append(
            f"    {b.band:>4} {b.rows:>6} {b.events:>7} {b.event_rate:>11.4f} "
            f"{b.cumulative_events_share:>12.4f} {b.lift:>5.2f} {c.mean_predicted:>8.4f}  "
            f"{b.min_score:.4g}..{b.max_score:.4g}"
        )
    return lines
