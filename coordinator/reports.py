"""What a party may report about a job, checked before a report touches the job."""

from __future__ import annotations

from coordinator.errors import CoordinatorError

RUNNING = ("ALIGNING", "KEYING", "TRAINING", "VALIDATING")
EVENTS = ("state", "aligned", "round", "validation", "done", "failed")
_NUMBER = (int, float, type(None))
_PAYLOAD_TYPES: dict[str, type | tuple[type, ...]] = {
    "round": (int, type(None)),
    "total_rounds": (int, type(None)),
    "rounds": int,
    "loss": _NUMBER,
    "seconds": _NUMBER,
    "psi_seconds": _NUMBER,
    "intersection_size": (int, type(None)),
    "bytes_sent": (int, type(None)),
    "local_updates": (int, type(None)),
    "metrics": dict,
    "history": list,
    "reason": str,
}


def check_report(event: str, state: str, payload: dict) -> None:
    """Check a party's report before it touches the job.

    Raises:
        CoordinatorError: an unknown event or state, or a payload field of the wrong type.
    """
    if event not in EVENTS:
        raise CoordinatorError(f"unknown report event {event!r}; expected one of {EVENTS}")
    if event == "state" and state not in RUNNING:
        raise CoordinatorError(f"unknown job state {state!r}; a party reports one of {RUNNING}")
    for key, kind in _PAYLOAD_TYPES.items():
        if key in payload and not isinstance(payload[key], kind):
            raise CoordinatorError(f"report field {key!r} has the wrong type ({payload[key]!r})")
    metrics = payload.get("metrics") or {}
    if not all(isinstance(v, _NUMBER) for v in metrics.values()):
        raise CoordinatorError("report field 'metrics' must map names to numbers")
