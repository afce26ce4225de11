"""Progress reports to the coordinator, as typed `vfl.v1.ReportProgressRequest` events.

A job's reporter only queues its reports: the daemon's `ReportSender`
(`party.report_sender`) delivers them in the background, so a coordinator outage never
slows training. Progress reports are best effort (throttled here, coalesced and bounded
there); the final ones (`done`, `failed`) are kept until the coordinator has them, and a
job's end waits up to `FINAL_WAIT_S` for it to take them. The coordinator's answer "stop"
cancels the job at this party.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from vfl.contract.states import JobState
from vfl.party.report_sender import ReportSender
from vfl.party.training.metrics import split_metrics
from vfl.proto import coordinator_pb2 as pb, party_pb2

REPORT_INTERVAL_S = 0.5
FINAL_WAIT_S = 3.0  # how long a job's end waits for the coordinator to take its last report


class CoordinatorReporter:
    """One job's reports from one party (the `Reporter` of `party.training.context`).

    Args:
        sender: the daemon's report sender, or None when it runs without a coordinator.
        job_id, party_id: whose reports these are.
        on_stop: called when the coordinator says the job ended (e.g. was cancelled).
    """

    def __init__(
        self,
        sender: ReportSender | None,
        job_id: str,
        party_id: str,
        on_stop: Callable[[], None],
    ) -> None:
        self._sender, self._job_id, self._party_id = sender, job_id, party_id
        self._on_stop = on_stop
        self._last = 0.0

    def stage(self, state: JobState) -> None:
        self._send(stage=pb.StageReached(state=state))

    def aligned(self, intersection_size: int, psi_seconds: float, test_size: int = 0) -> None:
        self._send(
            aligned=pb.Aligned(
                intersection_size=intersection_size,
                psi_seconds=psi_seconds,
                test_intersection_size=test_size,
            )
        )

    def round(
        self, rnd: int, total: int, loss: float | None, bytes_sent: int = 0, local_updates: int = 0
    ) -> None:
        now = time.monotonic()
        if now - self._last >= REPORT_INTERVAL_S or rnd == total:
            self._last = now
            self._send(
                round=pb.RoundDone(
                    round=rnd,
                    total_rounds=total,
                    loss=loss if loss is not None and math.isfinite(loss) else None,
                    bytes_sent=bytes_sent,
                    local_updates=local_updates,
                )
            )

    def validation(self, rnd: int, metrics: Mapping[str, float]) -> None:
        numbers, undefined = split_metrics(metrics)
        self._send(validation=pb.Validated(round=rnd, metrics=numbers, undefined=undefined))

    def checkpoint(self, rnd: int) -> None:
        self._send(checkpoint=pb.Checkpointed(round=rnd))

    def done(self, result: Mapping[str, Any]) -> None:
        self._send_final(done=party_done(result))

    def failed(self, reason: str, pause: bool = False) -> None:
        """This party ended the job for `reason`; with `pause`, for a problem its
        operator can mend (the job pauses, to resume from its last checkpoint)."""
        self._send_final(failed=pb.PartyFailed(reason=reason, pause=pause))

    def _send(self, **event: Any) -> threading.Event | None:
        """Queue one report; returns at once, whether or not the coordinator answers."""
        if self._sender is None:
            return None
        request = pb.ReportProgressRequest(job_id=self._job_id, party_id=self._party_id, **event)
        return self._sender.post(request, self._on_stop)

    def _send_final(self, **event: Any) -> None:
        """Queue the job's last report and give the coordinator `FINAL_WAIT_S` to take it
        before the job ends here: then it hears of this party's own failure before the
        peers' failures that follow from it, and that this party finished before the
        party stops listing the job. The report stays queued if that time passes."""
        settled = self._send(**event)
        if settled is not None:
            settled.wait(FINAL_WAIT_S)


def party_done(result: Mapping[str, Any]) -> pb.PartyDone:
    """The `done` report of a trainer's result: rounds, local updates, seconds, bytes sent,
    and at the active party the final metrics, every validation and the evaluation of a
    binary task; a prediction's summary, drift counts and stability."""
    history = [
        pb.ValidationPoint(
            round=h["round"],
            seconds=h.get("seconds", 0.0),
            train_seconds=h.get("train_seconds", 0.0),
            local_updates=h.get("local_updates", 0),
            metrics=split_metrics({k: v for k, v in h.items() if k not in _POINT_FIELDS})[0],
        )
        for h in result.get("history", [])
    ]
    metrics, undefined = split_metrics(result.get("metrics", {}))
    return pb.PartyDone(
        rounds=result.get("rounds", 0),
        local_updates=result.get("local_updates", 0),
        bytes_sent=result.get("bytes_sent", 0),
        seconds=result.get("seconds", 0.0),
        metrics=metrics,
        undefined=undefined,
        history=history,
        prediction=pb.PredictionSummary(**result["prediction"]) if "prediction" in result else None,
        drift=party_pb2.DriftCounts(**result["drift"]) if "drift" in result else None,
        evaluation=result.get("evaluation"),  # `party.training.evaluation`
        stability=result.get("stability"),  # `party.tables.stability.summary`
        analysis=result.get("analysis"),
    )


_POINT_FIELDS = ("round", "seconds", "train_seconds", "local_updates")
