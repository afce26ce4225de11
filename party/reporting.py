"""Progress reports to the coordinator, as typed `vfl.v1.ReportProgressRequest` events.

Reports are best effort: a coordinator outage never stops training (a report that cannot
be delivered is logged and dropped), round reports are throttled, and the coordinator's
answer "stop" cancels the job at this party.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from coordinator.client import CoordinatorClient
from coordinator.states import JobState
from proto import coordinator_pb2 as pb

log = logging.getLogger(__name__)

REPORT_INTERVAL_S = 0.5


class CoordinatorReporter:
    """One job's reports from one party (the `Reporter` of `party.training.context`).

    Args:
        client: the coordinator, or None when the daemon runs without one.
        job_id, party_id: whose reports these are.
        on_stop: called when the coordinator says the job ended (e.g. was cancelled).
    """

    def __init__(
        self,
        client: CoordinatorClient | None,
        job_id: str,
        party_id: str,
        on_stop: Callable[[], None],
    ) -> None:
        self._client, self._job_id, self._party_id = client, job_id, party_id
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

    def round(self, rnd: int, total: int, loss: float | None) -> None:
        now = time.monotonic()
        if now - self._last >= REPORT_INTERVAL_S or rnd == total:
            self._last = now
            self._send(round=pb.RoundDone(round=rnd, total_rounds=total, loss=loss))

    def validation(self, rnd: int, metrics: Mapping[str, float]) -> None:
        self._send(validation=pb.Validated(round=rnd, metrics=metrics))

    def checkpoint(self, rnd: int) -> None:
        self._send(checkpoint=pb.Checkpointed(round=rnd))

    def done(self, result: Mapping[str, Any]) -> None:
        self._send(done=party_done(result))

    def failed(self, reason: str) -> None:
        self._send(failed=pb.PartyFailed(reason=reason))

    def _send(self, **event: Any) -> None:
        if self._client is None:
            return
        request = pb.ReportProgressRequest(job_id=self._job_id, party_id=self._party_id, **event)
        name = next(iter(event))
        try:
            stop = self._client.report(request)
        except Exception as exc:  # noqa: BLE001 - a coordinator outage must not stop training
            log.warning("job %s: progress report '%s' not delivered: %s", self._job_id, name, exc)
            return
        if stop and name not in ("done", "failed"):
            self._on_stop()


def party_done(result: Mapping[str, Any]) -> pb.PartyDone:
    """The `done` report of a trainer's result: rounds, local updates, seconds, bytes sent,
    and at the active party the final metrics and every validation."""
    history = [
        pb.ValidationPoint(
            round=h["round"],
            seconds=h.get("seconds", 0.0),
            train_seconds=h.get("train_seconds", 0.0),
            local_updates=h.get("local_updates", 0),
            metrics={k: v for k, v in h.items() if k not in _POINT_FIELDS},
        )
        for h in result.get("history", [])
    ]
    return pb.PartyDone(
        rounds=result.get("rounds", 0),
        local_updates=result.get("local_updates", 0),
        bytes_sent=result.get("bytes_sent", 0),
        seconds=result.get("seconds", 0.0),
        metrics=result.get("metrics", {}),
        history=history,
    )


_POINT_FIELDS = ("round", "seconds", "train_seconds", "local_updates")
