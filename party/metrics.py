"""Prometheus metrics of a party daemon (`vfl party serve --metrics HOST:PORT`).

The daemon owns one `PartyMetrics` (its own `CollectorRegistry`, no globals). Jobs feed it
through two seams they already have: every data-plane envelope passes the channel's
envelope hook (`envelope`), every progress report passes the job's reporter
(`MeteredReporter`, which also sees every training round).
The secure layers count their homomorphic operations in a plain
`secure.paillier.counters.OpCounts` the daemon hands them; this module exports those at
each scrape (`secure/` imports neither prometheus nor grpc). Names and labels:

    vfl_party_jobs{state}                     this party's jobs now: prepared, running
    vfl_party_rounds_total                    training rounds done
    vfl_party_round_seconds                   time between consecutive rounds (histogram)
    vfl_party_bytes_total{direction,peer}     data-plane payload bytes sent / received
    vfl_party_envelopes_total{direction,peer} data-plane envelopes sent / received
    vfl_party_paillier_operations_total{op}   encryptions, rerandomizations,
                                              decryptions, ciphertext products
                                              (rate(): operations per second)
    vfl_party_psi_rows_total                  rows in the intersections PSI found
    vfl_party_psi_seconds_total               time spent in PSI
    vfl_party_obfuscators_ready{key}          obfuscators kept ready for a peer's key
                                              (by its owner; filled while no job runs)
    vfl_party_refused_total{at}               calls refused at capacity (RESOURCE_EXHAUSTED
                                              and a retry hint): at "scoring" (every
                                              scoring.threads busy), "model queue" (a
                                              model's scoring.queue full), "model
                                              capacity" (not to be scored in time), "data
                                              per caller" or "session per caller" (a
                                              certificate's limits.peer_streams), "mailbox"
                                              (a job's limits.mailbox_mb); and "stalled
                                              stream": Push streams cancelled after
                                              limits.chunk_timeout_s without a chunk
    vfl_party_drift_total{model,kind}         scored cells outside the fitted preprocessing
    vfl_party_unstable_total{model,what,level} columns / scores of a prediction at watch
                                              (stability index >= 0.1) or shift (>= 0.25)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import TypeVar

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from vfl.contract.states import JobState
from vfl.party.reporting import CoordinatorReporter
from vfl.party.training.context import Instruments
from vfl.proto import coordinator_pb2 as pb
from vfl.secure.paillier.counters import OpCounts

M = TypeVar("M", GaugeMetricFamily, CounterMetricFamily)

ROUND_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class _Live(Collector):
    """What is read at each scrape: the jobs by state, the operation counts and the
    obfuscators kept ready."""

    def __init__(
        self,
        jobs_by_state: Callable[[], dict[str, int]],
        ops: OpCounts,
        ready: Callable[[], dict[str, int]],
    ) -> None:
        self._jobs_by_state, self._ops, self._ready = jobs_by_state, ops, ready

    def collect(self) -> Iterator[Metric]:
        yield _family(
            GaugeMetricFamily("vfl_party_jobs", "This party's jobs by state.", labels=["state"]),
            self._jobs_by_state(),
        )
        yield _family(
            CounterMetricFamily(
                "vfl_party_paillier_operations",
                "Homomorphic operations done by this party's secure layers.",
                labels=["op"],
            ),
            self._ops.snapshot(),
        )
        yield _family(
            GaugeMetricFamily(
                "vfl_party_obfuscators_ready",
                "Obfuscators kept ready for a peer's key (by the key's owner).",
                labels=["key"],
            ),
            self._ready(),
        )


def _family(family: M, counts: Mapping[str, float]) -> M:
    """`family` with one sample per label value of `counts`, in the label values' order."""
    for value, count in sorted(counts.items()):
        family.add_metric([value], count)
    return family


class PartyMetrics:
    """The metrics of one party daemon. `jobs_by_state` reads the daemon's jobs, `ready`
    its kept obfuscators by key owner."""

    def __init__(
        self,
        jobs_by_state: Callable[[], dict[str, int]],
        ready: Callable[[], dict[str, int]] = dict,
    ) -> None:
        self.registry = CollectorRegistry()
        self.ops = OpCounts()
        self.registry.register(_Live(jobs_by_state, self.ops, ready))
        r = self.registry
        self.rounds = Counter("vfl_party_rounds", "Training rounds done.", registry=r)
        self.round_seconds = Histogram(
            "vfl_party_round_seconds",
            "Seconds between consecutive training rounds of a job.",
            buckets=ROUND_BUCKETS,
            registry=r,
        )
        self.bytes = Counter(
            "vfl_party_bytes", "Data-plane payload bytes.", ["direction", "peer"], registry=r
        )
        self.envelopes = Counter(
            "vfl_party_envelopes", "Data-plane envelopes.", ["direction", "peer"], registry=r
        )
        self.psi_rows = Counter(
            "vfl_party_psi_rows", "Rows in the intersections PSI found.", registry=r
        )
        self.psi_seconds = Counter("vfl_party_psi_seconds", "Seconds spent in PSI.", registry=r)
        self.refused = Counter(
            "vfl_party_refused",
            "Calls refused at capacity (RESOURCE_EXHAUSTED with a retry hint), by where.",
            ["at"],
            registry=r,
        )
        self.drift = Counter(
            "vfl_party_drift",
            "Cells of scored rows outside what the model's preprocessing was fitted on.",
            ["model", "kind"],
            registry=r,
        )
        self.unstable = Counter(
            "vfl_party_unstable",
            "Columns (what=columns) and scores (what=scores) whose population stability index "
            "between the training rows and a prediction's rows was 0.1 or more (level=watch) "
            "or 0.25 or more (level=shift), one per prediction.",
            ["model", "what", "level"],
            registry=r,
        )

    def refusal(self, at: str) -> None:
        """Count one call refused at capacity, at `at` (a plane's name, "<plane> per
        caller", "model queue", "model capacity", "mailbox"), or cancelled as a "stalled
        stream"."""
        self.refused.labels(at).inc()

    def count_drift(self, model_id: str, counts: Mapping[str, int]) -> None:
        """Count a scoring's drift (`party.tables.preprocess.drift.Drift.totals`) for `model_id`."""
        for kind, n in counts.items():
            self.drift.labels(model_id, kind).inc(n)

    def count_stability(self, model_id: str, stability: pb.Stability) -> None:
        """Count a prediction's columns and scores at watch or shift
        (`party.tables.stability.summary`) for `model_id`."""
        for level in ("watch", "shift"):
            self.unstable.labels(model_id, "columns", level).inc(getattr(stability, level))
        if stability.HasField("scores") and stability.scores.level in ("watch", "shift"):
            self.unstable.labels(model_id, "scores", stability.scores.level).inc()

    def envelope(self, direction: str, sender: str, receiver: str, tag: str, data: bytes) -> None:
        """An `EnvelopeHook`: count one envelope sent or received."""
        peer = receiver if direction == "sent" else sender
        self.bytes.labels(direction, peer).inc(len(data))
        self.envelopes.labels(direction, peer).inc()

    def instruments(self) -> Instruments:
        """What one job's secure layers count: their operations."""
        return Instruments(self.ops)


class MeteredReporter:
    """A job's `Reporter` that counts PSI's rows and time, and every round with the time
    since the previous one, before passing each report on."""

    def __init__(
        self,
        inner: CoordinatorReporter,
        metrics: PartyMetrics,
        check: Callable[[], None] | None = None,
    ) -> None:
        """`check`: called at every stage, round and validation (the limits guard's
        `JobBudget.check`, which raises once the job is failed)."""
        self._inner, self._metrics = inner, metrics
        self._check = check or (lambda: None)
        self._last_round: float | None = None

    def stage(self, state: JobState) -> None:
        self._check()
        self._inner.stage(state)

    def aligned(self, intersection_size: int, psi_seconds: float, test_size: int = 0) -> None:
        self._metrics.psi_rows.inc(intersection_size + test_size)
        self._metrics.psi_seconds.inc(psi_seconds)
        self._inner.aligned(intersection_size, psi_seconds, test_size)

    def round(
        self, rnd: int, total: int, loss: float | None, bytes_sent: int = 0, local_updates: int = 0
    ) -> None:
        self._check()
        now = time.monotonic()
        self._metrics.rounds.inc()
        if self._last_round is not None:
            self._metrics.round_seconds.observe(now - self._last_round)
        self._last_round = now
        self._inner.round(rnd, total, loss, bytes_sent, local_updates)

    def validation(self, rnd: int, metrics: Mapping[str, float]) -> None:
        self._check()
        self._inner.validation(rnd, dict(metrics))

    def checkpoint(self, rnd: int) -> None:
        self._inner.checkpoint(rnd)

    def done(self, result: Mapping[str, object]) -> None:
        drift, model = result.get("drift"), result.get("model")
        if isinstance(drift, Mapping) and isinstance(model, str):
            self._metrics.count_drift(model, drift)
        stability = result.get("stability")
        if isinstance(stability, pb.Stability) and isinstance(model, str):
            self._metrics.count_stability(model, stability)
        self._inner.done(result)

    def failed(self, reason: str, pause: bool = False) -> None:
        self._inner.failed(reason, pause)
