"""A binary model's scores read against the labels as a credit risk team reads them: KS,
Gini and AUC, a lift (gains) table and a calibration table (`vfl.v1.Evaluation`).

Bands, precisely (docs/usage.md, "Evaluation"): the n rows are ranked by score, highest
first. Band k of ten nominally ends at rank floor(k n / 10); a run of tied scores is
never split, so a band whose end falls inside a run ends where the run ends instead (the
run belongs to the band it begins in). A band left with no rows that way is left out:
bands keep their numbers, so band 1 always holds the highest scores. Every figure of a
band depends on the scores and labels alone, never on the order the rows came in.

The scores are the probabilities a prediction writes (`Task.scores`' `score` column, of
the second class, the event), so the tables of a job and of `vfl predict` of the same
rows with the same model are the same numbers.
"""

from __future__ import annotations

import numpy as np
from vfl.party.training.metrics import auc, ks
from vfl.party.training.task import Task
from vfl.proto import coordinator_pb2 as pb

BANDS = 10


def band_ends(scores: np.ndarray, bands: int = BANDS) -> np.ndarray:
    """The end (exclusive) of each band's ranks over `scores` sorted highest first: the
    nominal end floor(k n / bands), moved to the end of the run of ties it falls in."""
    n = len(scores)
    starts = np.r_[0, np.flatnonzero(np.diff(scores) != 0) + 1]  # where each run begins
    run_end = np.r_[starts[1:], n]
    nominal = (np.arange(1, bands + 1) * n) // bands
    # the run holding rank nominal - 1 ends the band (a band ending at 0 holds no rank)
    run = np.searchsorted(starts, np.maximum(nominal - 1, 0), side="right") - 1
    return np.where(nominal > 0, run_end[run], 0)


def evaluate(labels: np.ndarray, scores: np.ndarray, bands: int = BANDS) -> pb.Evaluation | None:
    """The evaluation of probabilities `scores` against 0/1 `labels` (1: an event), or
    None when the rows do not hold both classes (the metrics say why)."""
    y = np.asarray(labels, dtype=np.float64) >= 0.5
    p = np.asarray(scores, dtype=np.float64)
    events = int(y.sum())
    if len(y) == 0 or events in (0, len(y)):
        return None
    order = np.argsort(-p, kind="stable")
    ranked, hits = p[order], y[order]
    area = auc(y, p)
    out = pb.Evaluation(rows=len(y), events=events, auc=area, ks=ks(y, p), gini=2.0 * area - 1.0)
    rate = events / len(y)
    begin, seen = 0, 0
    for k, end in enumerate(band_ends(ranked, bands).tolist(), start=1):
        if end <= begin:
            continue
        rows, hit = end - begin, int(hits[begin:end].sum())
        seen += hit
        out.lift.add(
            band=k,
            rows=rows,
            events=hit,
            event_rate=hit / rows,
            cumulative_events_share=seen / events,
            lift=hit / rows / rate,
            min_score=float(ranked[end - 1]),
            max_score=float(ranked[begin]),
        )
        out.calibration.add(
            band=k,
            rows=rows,
            mean_predicted=float(np.mean(ranked[begin:end])),
            event_rate=hit / rows,
        )
        begin = end
    return out


def evaluate_outputs(task: Task, out: np.ndarray, raw_labels: np.ndarray) -> pb.Evaluation | None:
    """The evaluation of a binary model's outputs `out` (as its scorer gives them) against
    the rows' labels as read, on the probabilities a prediction writes; None for another
    task, or rows of one class."""
    if task.kind != "binary":
        return None
    return evaluate(task.encode(raw_labels).numpy(), task.scores(out)["score"])
