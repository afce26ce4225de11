from vfl.proto import party_pb2 as _party_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class JobState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_STATE_UNSPECIFIED: _ClassVar[JobState]
    JOB_STATE_SUBMITTED: _ClassVar[JobState]
    JOB_STATE_ALIGNING: _ClassVar[JobState]
    JOB_STATE_KEYING: _ClassVar[JobState]
    JOB_STATE_TRAINING: _ClassVar[JobState]
    JOB_STATE_SUCCEEDED: _ClassVar[JobState]
    JOB_STATE_FAILED: _ClassVar[JobState]
    JOB_STATE_CANCELLED: _ClassVar[JobState]
    JOB_STATE_PAUSED: _ClassVar[JobState]
    JOB_STATE_PREDICTING: _ClassVar[JobState]
    JOB_STATE_QUEUED: _ClassVar[JobState]
    JOB_STATE_ANALYZING: _ClassVar[JobState]

class ModelState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MODEL_STATE_UNSPECIFIED: _ClassVar[ModelState]
    MODEL_STATE_AVAILABLE: _ClassVar[ModelState]
    MODEL_STATE_INCOMPLETE: _ClassVar[ModelState]
    MODEL_STATE_DELETING: _ClassVar[ModelState]
    MODEL_STATE_DELETED: _ClassVar[ModelState]
    MODEL_STATE_CORRUPT: _ClassVar[ModelState]
JOB_STATE_UNSPECIFIED: JobState
JOB_STATE_SUBMITTED: JobState
JOB_STATE_ALIGNING: JobState
JOB_STATE_KEYING: JobState
JOB_STATE_TRAINING: JobState
JOB_STATE_SUCCEEDED: JobState
JOB_STATE_FAILED: JobState
JOB_STATE_CANCELLED: JobState
JOB_STATE_PAUSED: JobState
JOB_STATE_PREDICTING: JobState
JOB_STATE_QUEUED: JobState
JOB_STATE_ANALYZING: JobState
MODEL_STATE_UNSPECIFIED: ModelState
MODEL_STATE_AVAILABLE: ModelState
MODEL_STATE_INCOMPLETE: ModelState
MODEL_STATE_DELETING: ModelState
MODEL_STATE_DELETED: ModelState
MODEL_STATE_CORRUPT: ModelState

class SubmitJobRequest(_message.Message):
    __slots__ = ("spec_yaml",)
    SPEC_YAML_FIELD_NUMBER: _ClassVar[int]
    spec_yaml: str
    def __init__(self, spec_yaml: _Optional[str] = ...) -> None: ...

class SubmitPredictionRequest(_message.Message):
    __slots__ = ("spec_yaml",)
    SPEC_YAML_FIELD_NUMBER: _ClassVar[int]
    spec_yaml: str
    def __init__(self, spec_yaml: _Optional[str] = ...) -> None: ...

class SubmitJobResponse(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class LocateModelRequest(_message.Message):
    __slots__ = ("model_id",)
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    def __init__(self, model_id: _Optional[str] = ...) -> None: ...

class LocateModelResponse(_message.Message):
    __slots__ = ("party_id", "address")
    PARTY_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    party_id: str
    address: str
    def __init__(self, party_id: _Optional[str] = ..., address: _Optional[str] = ...) -> None: ...

class LocatePartiesRequest(_message.Message):
    __slots__ = ("model_id",)
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    def __init__(self, model_id: _Optional[str] = ...) -> None: ...

class LocatePartiesResponse(_message.Message):
    __slots__ = ("addresses",)
    class AddressesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    addresses: _containers.ScalarMap[str, str]
    def __init__(self, addresses: _Optional[_Mapping[str, str]] = ...) -> None: ...

class JobSummary(_message.Message):
    __slots__ = ("job_id", "name", "state", "created_at", "updated_at", "reason")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    name: str
    state: JobState
    created_at: float
    updated_at: float
    reason: str
    def __init__(self, job_id: _Optional[str] = ..., name: _Optional[str] = ..., state: _Optional[_Union[JobState, str]] = ..., created_at: _Optional[float] = ..., updated_at: _Optional[float] = ..., reason: _Optional[str] = ...) -> None: ...

class ListJobsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListJobsResponse(_message.Message):
    __slots__ = ("jobs",)
    JOBS_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[JobSummary]
    def __init__(self, jobs: _Optional[_Iterable[_Union[JobSummary, _Mapping]]] = ...) -> None: ...

class GetJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class ValidationPoint(_message.Message):
    __slots__ = ("round", "seconds", "train_seconds", "local_updates", "metrics")
    class MetricsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    ROUND_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    TRAIN_SECONDS_FIELD_NUMBER: _ClassVar[int]
    LOCAL_UPDATES_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    round: int
    seconds: float
    train_seconds: float
    local_updates: int
    metrics: _containers.ScalarMap[str, float]
    def __init__(self, round: _Optional[int] = ..., seconds: _Optional[float] = ..., train_seconds: _Optional[float] = ..., local_updates: _Optional[int] = ..., metrics: _Optional[_Mapping[str, float]] = ...) -> None: ...

class PartyTotals(_message.Message):
    __slots__ = ("bytes_sent", "seconds", "local_updates", "drift", "ended_at", "stability")
    BYTES_SENT_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    LOCAL_UPDATES_FIELD_NUMBER: _ClassVar[int]
    DRIFT_FIELD_NUMBER: _ClassVar[int]
    ENDED_AT_FIELD_NUMBER: _ClassVar[int]
    STABILITY_FIELD_NUMBER: _ClassVar[int]
    bytes_sent: int
    seconds: float
    local_updates: int
    drift: _party_pb2.DriftCounts
    ended_at: float
    stability: Stability
    def __init__(self, bytes_sent: _Optional[int] = ..., seconds: _Optional[float] = ..., local_updates: _Optional[int] = ..., drift: _Optional[_Union[_party_pb2.DriftCounts, _Mapping]] = ..., ended_at: _Optional[float] = ..., stability: _Optional[_Union[Stability, _Mapping]] = ...) -> None: ...

class Evaluation(_message.Message):
    __slots__ = ("rows", "events", "auc", "ks", "gini", "lift", "calibration")
    ROWS_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    AUC_FIELD_NUMBER: _ClassVar[int]
    KS_FIELD_NUMBER: _ClassVar[int]
    GINI_FIELD_NUMBER: _ClassVar[int]
    LIFT_FIELD_NUMBER: _ClassVar[int]
    CALIBRATION_FIELD_NUMBER: _ClassVar[int]
    rows: int
    events: int
    auc: float
    ks: float
    gini: float
    lift: _containers.RepeatedCompositeFieldContainer[LiftBand]
    calibration: _containers.RepeatedCompositeFieldContainer[CalibrationBand]
    def __init__(self, rows: _Optional[int] = ..., events: _Optional[int] = ..., auc: _Optional[float] = ..., ks: _Optional[float] = ..., gini: _Optional[float] = ..., lift: _Optional[_Iterable[_Union[LiftBand, _Mapping]]] = ..., calibration: _Optional[_Iterable[_Union[CalibrationBand, _Mapping]]] = ...) -> None: ...

class LiftBand(_message.Message):
    __slots__ = ("band", "rows", "events", "event_rate", "cumulative_events_share", "lift", "min_score", "max_score")
    BAND_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    EVENT_RATE_FIELD_NUMBER: _ClassVar[int]
    CUMULATIVE_EVENTS_SHARE_FIELD_NUMBER: _ClassVar[int]
    LIFT_FIELD_NUMBER: _ClassVar[int]
    MIN_SCORE_FIELD_NUMBER: _ClassVar[int]
    MAX_SCORE_FIELD_NUMBER: _ClassVar[int]
    band: int
    rows: int
    events: int
    event_rate: float
    cumulative_events_share: float
    lift: float
    min_score: float
    max_score: float
    def __init__(self, band: _Optional[int] = ..., rows: _Optional[int] = ..., events: _Optional[int] = ..., event_rate: _Optional[float] = ..., cumulative_events_share: _Optional[float] = ..., lift: _Optional[float] = ..., min_score: _Optional[float] = ..., max_score: _Optional[float] = ...) -> None: ...

class CalibrationBand(_message.Message):
    __slots__ = ("band", "rows", "mean_predicted", "event_rate")
    BAND_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    MEAN_PREDICTED_FIELD_NUMBER: _ClassVar[int]
    EVENT_RATE_FIELD_NUMBER: _ClassVar[int]
    band: int
    rows: int
    mean_predicted: float
    event_rate: float
    def __init__(self, band: _Optional[int] = ..., rows: _Optional[int] = ..., mean_predicted: _Optional[float] = ..., event_rate: _Optional[float] = ...) -> None: ...

class Stability(_message.Message):
    __slots__ = ("columns", "watch", "shift", "shared", "scores")
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    WATCH_FIELD_NUMBER: _ClassVar[int]
    SHIFT_FIELD_NUMBER: _ClassVar[int]
    SHARED_FIELD_NUMBER: _ClassVar[int]
    SCORES_FIELD_NUMBER: _ClassVar[int]
    columns: int
    watch: int
    shift: int
    shared: _containers.RepeatedCompositeFieldContainer[ColumnStability]
    scores: ColumnStability
    def __init__(self, columns: _Optional[int] = ..., watch: _Optional[int] = ..., shift: _Optional[int] = ..., shared: _Optional[_Iterable[_Union[ColumnStability, _Mapping]]] = ..., scores: _Optional[_Union[ColumnStability, _Mapping]] = ...) -> None: ...

class ColumnStability(_message.Message):
    __slots__ = ("column", "index", "level")
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    column: str
    index: float
    level: str
    def __init__(self, column: _Optional[str] = ..., index: _Optional[float] = ..., level: _Optional[str] = ...) -> None: ...

class JobResult(_message.Message):
    __slots__ = ("job", "started_at", "round", "total_rounds", "loss", "intersection_size", "psi_seconds", "rounds", "local_updates", "metrics", "history", "parties", "bytes_sent", "seconds", "checkpoints", "checkpoint_round", "resumed_from", "prediction", "refused", "undefined_metrics", "evaluation", "analysis")
    class MetricsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class PartiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: PartyTotals
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[PartyTotals, _Mapping]] = ...) -> None: ...
    class CheckpointsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class UndefinedMetricsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    JOB_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    TOTAL_ROUNDS_FIELD_NUMBER: _ClassVar[int]
    LOSS_FIELD_NUMBER: _ClassVar[int]
    INTERSECTION_SIZE_FIELD_NUMBER: _ClassVar[int]
    PSI_SECONDS_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_FIELD_NUMBER: _ClassVar[int]
    LOCAL_UPDATES_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    PARTIES_FIELD_NUMBER: _ClassVar[int]
    BYTES_SENT_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINTS_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_ROUND_FIELD_NUMBER: _ClassVar[int]
    RESUMED_FROM_FIELD_NUMBER: _ClassVar[int]
    PREDICTION_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    UNDEFINED_METRICS_FIELD_NUMBER: _ClassVar[int]
    EVALUATION_FIELD_NUMBER: _ClassVar[int]
    ANALYSIS_FIELD_NUMBER: _ClassVar[int]
    job: str
    started_at: float
    round: int
    total_rounds: int
    loss: float
    intersection_size: int
    psi_seconds: float
    rounds: int
    local_updates: int
    metrics: _containers.ScalarMap[str, float]
    history: _containers.RepeatedCompositeFieldContainer[ValidationPoint]
    parties: _containers.MessageMap[str, PartyTotals]
    bytes_sent: int
    seconds: float
    checkpoints: _containers.ScalarMap[str, int]
    checkpoint_round: int
    resumed_from: int
    prediction: PredictionSummary
    refused: bool
    undefined_metrics: _containers.ScalarMap[str, str]
    evaluation: Evaluation
    analysis: Analysis
    def __init__(self, job: _Optional[str] = ..., started_at: _Optional[float] = ..., round: _Optional[int] = ..., total_rounds: _Optional[int] = ..., loss: _Optional[float] = ..., intersection_size: _Optional[int] = ..., psi_seconds: _Optional[float] = ..., rounds: _Optional[int] = ..., local_updates: _Optional[int] = ..., metrics: _Optional[_Mapping[str, float]] = ..., history: _Optional[_Iterable[_Union[ValidationPoint, _Mapping]]] = ..., parties: _Optional[_Mapping[str, PartyTotals]] = ..., bytes_sent: _Optional[int] = ..., seconds: _Optional[float] = ..., checkpoints: _Optional[_Mapping[str, int]] = ..., checkpoint_round: _Optional[int] = ..., resumed_from: _Optional[int] = ..., prediction: _Optional[_Union[PredictionSummary, _Mapping]] = ..., refused: _Optional[bool] = ..., undefined_metrics: _Optional[_Mapping[str, str]] = ..., evaluation: _Optional[_Union[Evaluation, _Mapping]] = ..., analysis: _Optional[_Union[Analysis, _Mapping]] = ...) -> None: ...

class ColumnAnalysis(_message.Message):
    __slots__ = ("party", "column", "categorical", "edges", "categories", "empty", "bins_known", "events", "non_events", "woe", "iv", "note", "selected", "merged_from")
    PARTY_FIELD_NUMBER: _ClassVar[int]
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    CATEGORICAL_FIELD_NUMBER: _ClassVar[int]
    EDGES_FIELD_NUMBER: _ClassVar[int]
    CATEGORIES_FIELD_NUMBER: _ClassVar[int]
    EMPTY_FIELD_NUMBER: _ClassVar[int]
    BINS_KNOWN_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    NON_EVENTS_FIELD_NUMBER: _ClassVar[int]
    WOE_FIELD_NUMBER: _ClassVar[int]
    IV_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    SELECTED_FIELD_NUMBER: _ClassVar[int]
    MERGED_FROM_FIELD_NUMBER: _ClassVar[int]
    party: str
    column: str
    categorical: bool
    edges: _containers.RepeatedScalarFieldContainer[float]
    categories: _containers.RepeatedScalarFieldContainer[str]
    empty: bool
    bins_known: bool
    events: _containers.RepeatedScalarFieldContainer[int]
    non_events: _containers.RepeatedScalarFieldContainer[int]
    woe: _containers.RepeatedScalarFieldContainer[float]
    iv: float
    note: str
    selected: bool
    merged_from: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, party: _Optional[str] = ..., column: _Optional[str] = ..., categorical: _Optional[bool] = ..., edges: _Optional[_Iterable[float]] = ..., categories: _Optional[_Iterable[str]] = ..., empty: _Optional[bool] = ..., bins_known: _Optional[bool] = ..., events: _Optional[_Iterable[int]] = ..., non_events: _Optional[_Iterable[int]] = ..., woe: _Optional[_Iterable[float]] = ..., iv: _Optional[float] = ..., note: _Optional[str] = ..., selected: _Optional[bool] = ..., merged_from: _Optional[_Iterable[int]] = ...) -> None: ...

class Analysis(_message.Message):
    __slots__ = ("columns", "rows", "events", "non_events")
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    NON_EVENTS_FIELD_NUMBER: _ClassVar[int]
    columns: _containers.RepeatedCompositeFieldContainer[ColumnAnalysis]
    rows: int
    events: int
    non_events: int
    def __init__(self, columns: _Optional[_Iterable[_Union[ColumnAnalysis, _Mapping]]] = ..., rows: _Optional[int] = ..., events: _Optional[int] = ..., non_events: _Optional[int] = ...) -> None: ...

class PredictionSummary(_message.Message):
    __slots__ = ("model", "rows", "scored", "missing", "output")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    SCORED_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    model: str
    rows: int
    scored: int
    missing: int
    output: str
    def __init__(self, model: _Optional[str] = ..., rows: _Optional[int] = ..., scored: _Optional[int] = ..., missing: _Optional[int] = ..., output: _Optional[str] = ...) -> None: ...

class GetJobResponse(_message.Message):
    __slots__ = ("job", "result")
    JOB_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    job: JobSummary
    result: JobResult
    def __init__(self, job: _Optional[_Union[JobSummary, _Mapping]] = ..., result: _Optional[_Union[JobResult, _Mapping]] = ...) -> None: ...

class GetJobReportRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class RoundPoint(_message.Message):
    __slots__ = ("party_id", "round", "seconds", "loss", "bytes_sent", "local_updates")
    PARTY_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    LOSS_FIELD_NUMBER: _ClassVar[int]
    BYTES_SENT_FIELD_NUMBER: _ClassVar[int]
    LOCAL_UPDATES_FIELD_NUMBER: _ClassVar[int]
    party_id: str
    round: int
    seconds: float
    loss: float
    bytes_sent: int
    local_updates: int
    def __init__(self, party_id: _Optional[str] = ..., round: _Optional[int] = ..., seconds: _Optional[float] = ..., loss: _Optional[float] = ..., bytes_sent: _Optional[int] = ..., local_updates: _Optional[int] = ...) -> None: ...

class GetJobReportResponse(_message.Message):
    __slots__ = ("job", "result", "spec_yaml", "spec_json", "rounds", "validations")
    JOB_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    SPEC_YAML_FIELD_NUMBER: _ClassVar[int]
    SPEC_JSON_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_FIELD_NUMBER: _ClassVar[int]
    VALIDATIONS_FIELD_NUMBER: _ClassVar[int]
    job: JobSummary
    result: JobResult
    spec_yaml: str
    spec_json: str
    rounds: _containers.RepeatedCompositeFieldContainer[RoundPoint]
    validations: _containers.RepeatedCompositeFieldContainer[ValidationPoint]
    def __init__(self, job: _Optional[_Union[JobSummary, _Mapping]] = ..., result: _Optional[_Union[JobResult, _Mapping]] = ..., spec_yaml: _Optional[str] = ..., spec_json: _Optional[str] = ..., rounds: _Optional[_Iterable[_Union[RoundPoint, _Mapping]]] = ..., validations: _Optional[_Iterable[_Union[ValidationPoint, _Mapping]]] = ...) -> None: ...

class WatchJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class CancelJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class CancelJobResponse(_message.Message):
    __slots__ = ("state",)
    STATE_FIELD_NUMBER: _ClassVar[int]
    state: JobState
    def __init__(self, state: _Optional[_Union[JobState, str]] = ...) -> None: ...

class ResumeJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class ResumeJobResponse(_message.Message):
    __slots__ = ("state", "round")
    STATE_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    state: JobState
    round: int
    def __init__(self, state: _Optional[_Union[JobState, str]] = ..., round: _Optional[int] = ...) -> None: ...

class ModelHolding(_message.Message):
    __slots__ = ("party_id", "role", "created_at", "key_fingerprint", "columns", "drift", "table_problems", "problem")
    class TableProblemsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PARTY_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    KEY_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    DRIFT_FIELD_NUMBER: _ClassVar[int]
    TABLE_PROBLEMS_FIELD_NUMBER: _ClassVar[int]
    PROBLEM_FIELD_NUMBER: _ClassVar[int]
    party_id: str
    role: str
    created_at: float
    key_fingerprint: str
    columns: int
    drift: _party_pb2.DriftCounts
    table_problems: _containers.ScalarMap[str, str]
    problem: str
    def __init__(self, party_id: _Optional[str] = ..., role: _Optional[str] = ..., created_at: _Optional[float] = ..., key_fingerprint: _Optional[str] = ..., columns: _Optional[int] = ..., drift: _Optional[_Union[_party_pb2.DriftCounts, _Mapping]] = ..., table_problems: _Optional[_Mapping[str, str]] = ..., problem: _Optional[str] = ...) -> None: ...

class ModelSummary(_message.Message):
    __slots__ = ("model_id", "name", "protocol", "state", "created_at", "metrics", "parties", "holders", "missing", "unreachable", "deleted_at", "parts")
    class MetricsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    PARTIES_FIELD_NUMBER: _ClassVar[int]
    HOLDERS_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    UNREACHABLE_FIELD_NUMBER: _ClassVar[int]
    DELETED_AT_FIELD_NUMBER: _ClassVar[int]
    PARTS_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    name: str
    protocol: str
    state: ModelState
    created_at: float
    metrics: _containers.ScalarMap[str, float]
    parties: _containers.RepeatedScalarFieldContainer[str]
    holders: _containers.RepeatedScalarFieldContainer[str]
    missing: _containers.RepeatedScalarFieldContainer[str]
    unreachable: _containers.RepeatedScalarFieldContainer[str]
    deleted_at: float
    parts: _containers.RepeatedCompositeFieldContainer[ModelHolding]
    def __init__(self, model_id: _Optional[str] = ..., name: _Optional[str] = ..., protocol: _Optional[str] = ..., state: _Optional[_Union[ModelState, str]] = ..., created_at: _Optional[float] = ..., metrics: _Optional[_Mapping[str, float]] = ..., parties: _Optional[_Iterable[str]] = ..., holders: _Optional[_Iterable[str]] = ..., missing: _Optional[_Iterable[str]] = ..., unreachable: _Optional[_Iterable[str]] = ..., deleted_at: _Optional[float] = ..., parts: _Optional[_Iterable[_Union[ModelHolding, _Mapping]]] = ...) -> None: ...

class ListModelsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListModelsResponse(_message.Message):
    __slots__ = ("models",)
    MODELS_FIELD_NUMBER: _ClassVar[int]
    models: _containers.RepeatedCompositeFieldContainer[ModelSummary]
    def __init__(self, models: _Optional[_Iterable[_Union[ModelSummary, _Mapping]]] = ...) -> None: ...

class GetModelRequest(_message.Message):
    __slots__ = ("model_id",)
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    def __init__(self, model_id: _Optional[str] = ...) -> None: ...

class GetModelResponse(_message.Message):
    __slots__ = ("model",)
    MODEL_FIELD_NUMBER: _ClassVar[int]
    model: ModelSummary
    def __init__(self, model: _Optional[_Union[ModelSummary, _Mapping]] = ...) -> None: ...

class DeleteModelRequest(_message.Message):
    __slots__ = ("model_id",)
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    def __init__(self, model_id: _Optional[str] = ...) -> None: ...

class DeleteModelResponse(_message.Message):
    __slots__ = ("model",)
    MODEL_FIELD_NUMBER: _ClassVar[int]
    model: ModelSummary
    def __init__(self, model: _Optional[_Union[ModelSummary, _Mapping]] = ...) -> None: ...

class CheckFederationRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class FederationParty(_message.Message):
    __slots__ = ("party_id", "address", "last_seen", "error", "version", "time", "asked_at", "peers")
    PARTY_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    ASKED_AT_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    party_id: str
    address: str
    last_seen: float
    error: str
    version: str
    time: float
    asked_at: float
    peers: _containers.RepeatedCompositeFieldContainer[_party_pb2.PeerCheck]
    def __init__(self, party_id: _Optional[str] = ..., address: _Optional[str] = ..., last_seen: _Optional[float] = ..., error: _Optional[str] = ..., version: _Optional[str] = ..., time: _Optional[float] = ..., asked_at: _Optional[float] = ..., peers: _Optional[_Iterable[_Union[_party_pb2.PeerCheck, _Mapping]]] = ...) -> None: ...

class CheckFederationResponse(_message.Message):
    __slots__ = ("version", "time", "parties")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    PARTIES_FIELD_NUMBER: _ClassVar[int]
    version: str
    time: float
    parties: _containers.RepeatedCompositeFieldContainer[FederationParty]
    def __init__(self, version: _Optional[str] = ..., time: _Optional[float] = ..., parties: _Optional[_Iterable[_Union[FederationParty, _Mapping]]] = ...) -> None: ...

class RegisterPartyRequest(_message.Message):
    __slots__ = ("party_id", "address", "datasets")
    PARTY_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    DATASETS_FIELD_NUMBER: _ClassVar[int]
    party_id: str
    address: str
    datasets: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, party_id: _Optional[str] = ..., address: _Optional[str] = ..., datasets: _Optional[_Iterable[str]] = ...) -> None: ...

class RegisterPartyResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StageReached(_message.Message):
    __slots__ = ("state",)
    STATE_FIELD_NUMBER: _ClassVar[int]
    state: JobState
    def __init__(self, state: _Optional[_Union[JobState, str]] = ...) -> None: ...

class Aligned(_message.Message):
    __slots__ = ("intersection_size", "psi_seconds", "test_intersection_size")
    INTERSECTION_SIZE_FIELD_NUMBER: _ClassVar[int]
    PSI_SECONDS_FIELD_NUMBER: _ClassVar[int]
    TEST_INTERSECTION_SIZE_FIELD_NUMBER: _ClassVar[int]
    intersection_size: int
    psi_seconds: float
    test_intersection_size: int
    def __init__(self, intersection_size: _Optional[int] = ..., psi_seconds: _Optional[float] = ..., test_intersection_size: _Optional[int] = ...) -> None: ...

class RoundDone(_message.Message):
    __slots__ = ("round", "total_rounds", "loss", "bytes_sent", "local_updates")
    ROUND_FIELD_NUMBER: _ClassVar[int]
    TOTAL_ROUNDS_FIELD_NUMBER: _ClassVar[int]
    LOSS_FIELD_NUMBER: _ClassVar[int]
    BYTES_SENT_FIELD_NUMBER: _ClassVar[int]
    LOCAL_UPDATES_FIELD_NUMBER: _ClassVar[int]
    round: int
    total_rounds: int
    loss: float
    bytes_sent: int
    local_updates: int
    def __init__(self, round: _Optional[int] = ..., total_rounds: _Optional[int] = ..., loss: _Optional[float] = ..., bytes_sent: _Optional[int] = ..., local_updates: _Optional[int] = ...) -> None: ...

class Validated(_message.Message):
    __slots__ = ("round", "metrics", "undefined")
    class MetricsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class UndefinedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ROUND_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    UNDEFINED_FIELD_NUMBER: _ClassVar[int]
    round: int
    metrics: _containers.ScalarMap[str, float]
    undefined: _containers.ScalarMap[str, str]
    def __init__(self, round: _Optional[int] = ..., metrics: _Optional[_Mapping[str, float]] = ..., undefined: _Optional[_Mapping[str, str]] = ...) -> None: ...

class PartyDone(_message.Message):
    __slots__ = ("rounds", "local_updates", "bytes_sent", "seconds", "metrics", "history", "prediction", "drift", "undefined", "evaluation", "stability", "analysis")
    class MetricsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class UndefinedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ROUNDS_FIELD_NUMBER: _ClassVar[int]
    LOCAL_UPDATES_FIELD_NUMBER: _ClassVar[int]
    BYTES_SENT_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    PREDICTION_FIELD_NUMBER: _ClassVar[int]
    DRIFT_FIELD_NUMBER: _ClassVar[int]
    UNDEFINED_FIELD_NUMBER: _ClassVar[int]
    EVALUATION_FIELD_NUMBER: _ClassVar[int]
    STABILITY_FIELD_NUMBER: _ClassVar[int]
    ANALYSIS_FIELD_NUMBER: _ClassVar[int]
    rounds: int
    local_updates: int
    bytes_sent: int
    seconds: float
    metrics: _containers.ScalarMap[str, float]
    history: _containers.RepeatedCompositeFieldContainer[ValidationPoint]
    prediction: PredictionSummary
    drift: _party_pb2.DriftCounts
    undefined: _containers.ScalarMap[str, str]
    evaluation: Evaluation
    stability: Stability
    analysis: Analysis
    def __init__(self, rounds: _Optional[int] = ..., local_updates: _Optional[int] = ..., bytes_sent: _Optional[int] = ..., seconds: _Optional[float] = ..., metrics: _Optional[_Mapping[str, float]] = ..., history: _Optional[_Iterable[_Union[ValidationPoint, _Mapping]]] = ..., prediction: _Optional[_Union[PredictionSummary, _Mapping]] = ..., drift: _Optional[_Union[_party_pb2.DriftCounts, _Mapping]] = ..., undefined: _Optional[_Mapping[str, str]] = ..., evaluation: _Optional[_Union[Evaluation, _Mapping]] = ..., stability: _Optional[_Union[Stability, _Mapping]] = ..., analysis: _Optional[_Union[Analysis, _Mapping]] = ...) -> None: ...

class Checkpointed(_message.Message):
    __slots__ = ("round",)
    ROUND_FIELD_NUMBER: _ClassVar[int]
    round: int
    def __init__(self, round: _Optional[int] = ...) -> None: ...

class PartyFailed(_message.Message):
    __slots__ = ("reason", "pause")
    REASON_FIELD_NUMBER: _ClassVar[int]
    PAUSE_FIELD_NUMBER: _ClassVar[int]
    reason: str
    pause: bool
    def __init__(self, reason: _Optional[str] = ..., pause: _Optional[bool] = ...) -> None: ...

class PartyStopping(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class ReportProgressRequest(_message.Message):
    __slots__ = ("job_id", "party_id", "stage", "aligned", "round", "validation", "done", "failed", "checkpoint", "stopping", "queued_seconds")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PARTY_ID_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    ALIGNED_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    VALIDATION_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    STOPPING_FIELD_NUMBER: _ClassVar[int]
    QUEUED_SECONDS_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    party_id: str
    stage: StageReached
    aligned: Aligned
    round: RoundDone
    validation: Validated
    done: PartyDone
    failed: PartyFailed
    checkpoint: Checkpointed
    stopping: PartyStopping
    queued_seconds: float
    def __init__(self, job_id: _Optional[str] = ..., party_id: _Optional[str] = ..., stage: _Optional[_Union[StageReached, _Mapping]] = ..., aligned: _Optional[_Union[Aligned, _Mapping]] = ..., round: _Optional[_Union[RoundDone, _Mapping]] = ..., validation: _Optional[_Union[Validated, _Mapping]] = ..., done: _Optional[_Union[PartyDone, _Mapping]] = ..., failed: _Optional[_Union[PartyFailed, _Mapping]] = ..., checkpoint: _Optional[_Union[Checkpointed, _Mapping]] = ..., stopping: _Optional[_Union[PartyStopping, _Mapping]] = ..., queued_seconds: _Optional[float] = ...) -> None: ...

class ReportProgressResponse(_message.Message):
    __slots__ = ("cancel",)
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    cancel: bool
    def __init__(self, cancel: _Optional[bool] = ...) -> None: ...
