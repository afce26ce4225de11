"""Job states: the `vfl.v1.JobState` enum of the control plane, its groups and its names.

SUBMITTED (-> QUEUED) -> ALIGNING -> KEYING (blindfl) -> TRAINING -> SUCCEEDED, or FAILED /
CANCELLED with a reason (a prediction job: SUBMITTED -> ALIGNING -> PREDICTING ->
SUCCEEDED; an analysis job, `vfl analyze`: SUBMITTED -> ALIGNING -> ANALYZING ->
SUCCEEDED); a job whose party was lost is PAUSED until `vfl resume` (or the
coordinator's --auto-resume) launches it again from its newest common checkpoint. A job
that a party cannot take yet (it holds as many jobs as its `limits:` allow) waits QUEUED,
in the coordinator's job store, and is launched once its parties have room. The job store
keeps the short name ("TRAINING") so the database reads well.

Model states (`vfl.v1.ModelState`, `coordinator.models`): AVAILABLE, INCOMPLETE, CORRUPT,
DELETING, DELETED, shown in lower case ("available").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from vfl.proto import coordinator_pb2 as pb

# A state's value: an int at run time; the type checker reads the enum's class from the
# generated stubs, where the run-time `ValueType` is not declared.
if TYPE_CHECKING:
    JobState: TypeAlias = pb.JobState
    ModelState: TypeAlias = pb.ModelState
else:
    JobState = pb.JobState.ValueType
    ModelState = pb.ModelState.ValueType

SUBMITTED = pb.JOB_STATE_SUBMITTED
ALIGNING = pb.JOB_STATE_ALIGNING
KEYING = pb.JOB_STATE_KEYING
TRAINING = pb.JOB_STATE_TRAINING
SUCCEEDED = pb.JOB_STATE_SUCCEEDED
FAILED = pb.JOB_STATE_FAILED
CANCELLED = pb.JOB_STATE_CANCELLED
PAUSED = pb.JOB_STATE_PAUSED
PREDICTING = pb.JOB_STATE_PREDICTING
QUEUED = pb.JOB_STATE_QUEUED
ANALYZING = pb.JOB_STATE_ANALYZING

TERMINAL = frozenset({SUCCEEDED, FAILED, CANCELLED})
# also the stages a party reports
RUNNING = frozenset({ALIGNING, KEYING, TRAINING, PREDICTING, ANALYZING})

_PREFIX = "JOB_STATE_"


def state_name(state: JobState) -> str:
    """The short name of a state, e.g. "TRAINING"."""
    return pb.JobState.Name(state).removeprefix(_PREFIX)


def state_from_name(name: str) -> JobState:
    """The state of a short name.

    Raises:
        ValueError: not a job state's name.
    """
    return pb.JobState.Value(_PREFIX + name)


AVAILABLE = pb.MODEL_STATE_AVAILABLE
INCOMPLETE = pb.MODEL_STATE_INCOMPLETE
DELETING = pb.MODEL_STATE_DELETING
DELETED = pb.MODEL_STATE_DELETED
CORRUPT = pb.MODEL_STATE_CORRUPT

_MODEL_PREFIX = "MODEL_STATE_"


def model_state_name(state: ModelState) -> str:
    """The name of a model state as `vfl models` shows it, e.g. "available"."""
    return pb.ModelState.Name(state).removeprefix(_MODEL_PREFIX).lower()
