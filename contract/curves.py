"""A job's curves from its report (`GetJobReportResponse`): what `vfl report` plots
and the dashboard draws, computed once here.

- training loss: the active party's, per reported round;
- validation: one series per metric (auc, accuracy, ...);
- bytes per round and local updates per round: one series per party, from the
  cumulative counters each party reports with its rounds. A party reports at most every
  half second, so a point is the mean over the rounds since its previous report; the
  first report of a run is left out (its bytes include PSI and key setup), and a counter
  that went back (a resumed job starts new counters) starts the series again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vfl.proto import coordinator_pb2 as pb


@dataclass(frozen=True)
class Series:
    """One curve: `values[i]` at round `rounds[i]`, `seconds[i]` after submission."""

    label: str
    rounds: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)

    def add(self, rnd: int, seconds: float, value: float) -> None:
        self.rounds.append(rnd)
        self.seconds.append(seconds)
        self.values.append(value)

    def to_plain(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "rounds": self.rounds,
            "seconds": self.seconds,
            "values": self.values,
        }


@dataclass(frozen=True)
class Curves:
    loss: list[Series]  # the active party's training loss (one series, or none yet)
    validation: list[Series]  # one per metric
    bytes_per_round: list[Series]  # one per party
    local_updates_per_round: list[Series]  # one per party; empty without local updates

    def to_plain(self) -> dict[str, Any]:
        return {
            name: [s.to_plain() for s in getattr(self, name)]
            for name in ("loss", "validation", "bytes_per_round", "local_updates_per_round")
        }


def curves(report: pb.GetJobReportResponse) -> Curves:
    """The curves of a job's report."""
    loss = Series("training loss")
    for p in report.rounds:
        if p.HasField("loss"):
            loss.add(p.round, p.seconds, p.loss)
    metrics: dict[str, Series] = {}
    for v in report.validations:
        for name, value in sorted(v.metrics.items()):
            metrics.setdefault(name, Series(name)).add(v.round, v.seconds, value)
    updates = _per_round(report.rounds, "local_updates")
    return Curves(
        loss=[loss] if loss.values else [],
        validation=list(metrics.values()),
        bytes_per_round=_per_round(report.rounds, "bytes_sent"),
        local_updates_per_round=updates if any(any(s.values) for s in updates) else [],
    )


def _per_round(points: Any, counter: str) -> list[Series]:
    """Per party, the mean increase of its cumulative `counter` per round between two
    consecutive reports."""
    out: dict[str, Series] = {}
    last: dict[str, tuple[int, int]] = {}
    for p in points:
        series = out.setdefault(p.party_id, Series(p.party_id))
        value = getattr(p, counter)
        before = last.get(p.party_id)
        last[p.party_id] = (p.round, value)
        if before is None or p.round <= before[0] or value < before[1]:
            continue  # a run's first report, or a new run's counters
        series.add(p.round, p.seconds, (value - before[1]) / (p.round - before[0]))
    return list(out.values())
