"""Run a job with every party as a thread over the in-process channel (protocol tier)."""

from __future__ import annotations

import threading

from vfl.contract.spec import JobSpec, TableSource
from vfl.contract.states import JobState
from vfl.party.inference.batch import PredictJob
from vfl.party.job import PartyJob
from vfl.party.state import StateDir
from vfl.secure.channel import InProcessHub
from vfl.secure.executor import BlockExecutor


class RecordingReporter:
    def __init__(self) -> None:
        self.rounds: list[tuple[int, float | None]] = []
        self.validations: list[tuple[int, dict]] = []
        self.stages: list[JobState] = []
        self.checkpoints: list[int] = []

    def round(
        self, rnd: int, total: int, loss: float | None, bytes_sent: int = 0, local_updates: int = 0
    ) -> None:
        self.rounds.append((rnd, loss))

    def validation(self, rnd: int, metrics: dict) -> None:
        self.validations.append((rnd, metrics))

    def checkpoint(self, rnd: int) -> None:
        self.checkpoints.append(rnd)

    def stage(self, state: JobState) -> None:
        self.stages.append(state)

    def aligned(self, intersection_size: int, psi_seconds: float, test_size: int = 0) -> None:
        self.alignment = {"intersection_size": intersection_size, "test_size": test_size}


def run_inprocess(
    spec: JobSpec,
    datasets: dict[str, dict[str, TableSource]],
    hook=None,
    states: dict[str, StateDir] | None = None,
    resume_round: int = 0,
    hub: InProcessHub | None = None,
    executors: dict[str, BlockExecutor] | None = None,
    record_views: bool = False,
) -> dict[str, dict]:
    """Run `spec` with parties as threads (each with its state directory in `states`, if
    given, resumed after `resume_round` if > 0; with the executor in `executors`, if any;
    recording its view there with `record_views`); re-raises the first party error."""
    hub = hub or InProcessHub()
    channels = {p.id: hub.channel(p.id, hook) for p in spec.parties}
    results: dict[str, dict] = {}
    errors: list[BaseException] = []

    def party(pid: str) -> None:
        try:
            state = None if states is None else states[pid]
            if spec.predict is not None:  # the model trained by a run here is "job"
                out = None if state is None else state.root / "predictions"
                job = PredictJob("predict", spec, pid, datasets[pid], state, out)
            else:
                executor = (executors or {}).get(pid)
                job = PartyJob(
                    "job",
                    spec,
                    pid,
                    datasets[pid],
                    state,
                    resume_round,
                    executor=executor,
                    record_views=record_views,
                )
            results[pid] = job.run(channels[pid], RecordingReporter())
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            errors.append(exc)
            hub.close(f"party {pid} failed: {exc}")

    threads = [threading.Thread(target=party, args=(p.id,)) for p in spec.parties]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    if errors:
        raise errors[0]
    return results
