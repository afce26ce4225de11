from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class IdError(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ID_ERROR_UNSPECIFIED: _ClassVar[IdError]
    ID_ERROR_UNKNOWN_ID: _ClassVar[IdError]
    ID_ERROR_NOT_AT_PEER: _ClassVar[IdError]
ID_ERROR_UNSPECIFIED: IdError
ID_ERROR_UNKNOWN_ID: IdError
ID_ERROR_NOT_AT_PEER: IdError

class PushChunk(_message.Message):
    __slots__ = ("job_id", "tag", "sender", "receiver", "data", "total_size")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    TAG_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    RECEIVER_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    tag: str
    sender: str
    receiver: str
    data: bytes
    total_size: int
    def __init__(self, job_id: _Optional[str] = ..., tag: _Optional[str] = ..., sender: _Optional[str] = ..., receiver: _Optional[str] = ..., data: _Optional[bytes] = ..., total_size: _Optional[int] = ...) -> None: ...

class PushResponse(_message.Message):
    __slots__ = ("duplicate",)
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    duplicate: bool
    def __init__(self, duplicate: _Optional[bool] = ...) -> None: ...

class PeerAddress(_message.Message):
    __slots__ = ("party_id", "address")
    PARTY_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    party_id: str
    address: str
    def __init__(self, party_id: _Optional[str] = ..., address: _Optional[str] = ...) -> None: ...

class PrepareJobRequest(_message.Message):
    __slots__ = ("job_id", "spec_json", "peers", "resume_round")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_JSON_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    RESUME_ROUND_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    spec_json: str
    peers: _containers.RepeatedCompositeFieldContainer[PeerAddress]
    resume_round: int
    def __init__(self, job_id: _Optional[str] = ..., spec_json: _Optional[str] = ..., peers: _Optional[_Iterable[_Union[PeerAddress, _Mapping]]] = ..., resume_round: _Optional[int] = ...) -> None: ...

class PrepareJobResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StartJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class StartJobResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AbortJobRequest(_message.Message):
    __slots__ = ("job_id", "reason")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    reason: str
    def __init__(self, job_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class AbortJobResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetPartyInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetPartyInfoResponse(_message.Message):
    __slots__ = ("party_id", "datasets", "running_jobs", "started_jobs", "version", "time", "max_concurrent_jobs", "started_at")
    PARTY_ID_FIELD_NUMBER: _ClassVar[int]
    DATASETS_FIELD_NUMBER: _ClassVar[int]
    RUNNING_JOBS_FIELD_NUMBER: _ClassVar[int]
    STARTED_JOBS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENT_JOBS_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    party_id: str
    datasets: _containers.RepeatedScalarFieldContainer[str]
    running_jobs: _containers.RepeatedScalarFieldContainer[str]
    started_jobs: _containers.RepeatedScalarFieldContainer[str]
    version: str
    time: float
    max_concurrent_jobs: int
    started_at: float
    def __init__(self, party_id: _Optional[str] = ..., datasets: _Optional[_Iterable[str]] = ..., running_jobs: _Optional[_Iterable[str]] = ..., started_jobs: _Optional[_Iterable[str]] = ..., version: _Optional[str] = ..., time: _Optional[float] = ..., max_concurrent_jobs: _Optional[int] = ..., started_at: _Optional[float] = ...) -> None: ...

class ListCheckpointsRequest(_message.Message):
    __slots__ = ("job_id", "spec_json")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_JSON_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    spec_json: str
    def __init__(self, job_id: _Optional[str] = ..., spec_json: _Optional[str] = ...) -> None: ...

class CheckpointInfo(_message.Message):
    __slots__ = ("round", "problem")
    ROUND_FIELD_NUMBER: _ClassVar[int]
    PROBLEM_FIELD_NUMBER: _ClassVar[int]
    round: int
    problem: str
    def __init__(self, round: _Optional[int] = ..., problem: _Optional[str] = ...) -> None: ...

class ListCheckpointsResponse(_message.Message):
    __slots__ = ("checkpoints",)
    CHECKPOINTS_FIELD_NUMBER: _ClassVar[int]
    checkpoints: _containers.RepeatedCompositeFieldContainer[CheckpointInfo]
    def __init__(self, checkpoints: _Optional[_Iterable[_Union[CheckpointInfo, _Mapping]]] = ...) -> None: ...

class ModelPart(_message.Message):
    __slots__ = ("model_id", "name", "role", "protocol", "created_at", "key_fingerprint", "columns", "drift", "table_problems", "problem")
    class TableProblemsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    KEY_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    DRIFT_FIELD_NUMBER: _ClassVar[int]
    TABLE_PROBLEMS_FIELD_NUMBER: _ClassVar[int]
    PROBLEM_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    name: str
    role: str
    protocol: str
    created_at: float
    key_fingerprint: str
    columns: int
    drift: DriftCounts
    table_problems: _containers.ScalarMap[str, str]
    problem: str
    def __init__(self, model_id: _Optional[str] = ..., name: _Optional[str] = ..., role: _Optional[str] = ..., protocol: _Optional[str] = ..., created_at: _Optional[float] = ..., key_fingerprint: _Optional[str] = ..., columns: _Optional[int] = ..., drift: _Optional[_Union[DriftCounts, _Mapping]] = ..., table_problems: _Optional[_Mapping[str, str]] = ..., problem: _Optional[str] = ...) -> None: ...

class DriftCounts(_message.Message):
    __slots__ = ("out_of_range", "unknown_categories", "unexpected_missing")
    OUT_OF_RANGE_FIELD_NUMBER: _ClassVar[int]
    UNKNOWN_CATEGORIES_FIELD_NUMBER: _ClassVar[int]
    UNEXPECTED_MISSING_FIELD_NUMBER: _ClassVar[int]
    out_of_range: int
    unknown_categories: int
    unexpected_missing: int
    def __init__(self, out_of_range: _Optional[int] = ..., unknown_categories: _Optional[int] = ..., unexpected_missing: _Optional[int] = ...) -> None: ...

class ListModelPartsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListModelPartsResponse(_message.Message):
    __slots__ = ("parts",)
    PARTS_FIELD_NUMBER: _ClassVar[int]
    parts: _containers.RepeatedCompositeFieldContainer[ModelPart]
    def __init__(self, parts: _Optional[_Iterable[_Union[ModelPart, _Mapping]]] = ...) -> None: ...

class DeleteModelPartRequest(_message.Message):
    __slots__ = ("model_id",)
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    def __init__(self, model_id: _Optional[str] = ...) -> None: ...

class DeleteModelPartResponse(_message.Message):
    __slots__ = ("held",)
    HELD_FIELD_NUMBER: _ClassVar[int]
    held: bool
    def __init__(self, held: _Optional[bool] = ...) -> None: ...

class PredictRequest(_message.Message):
    __slots__ = ("model_id", "ids")
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, model_id: _Optional[str] = ..., ids: _Optional[_Iterable[str]] = ...) -> None: ...

class IdScore(_message.Message):
    __slots__ = ("id", "values", "predicted_class", "error", "message")
    ID_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_CLASS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    id: str
    values: _containers.RepeatedScalarFieldContainer[float]
    predicted_class: str
    error: IdError
    message: str
    def __init__(self, id: _Optional[str] = ..., values: _Optional[_Iterable[float]] = ..., predicted_class: _Optional[str] = ..., error: _Optional[_Union[IdError, str]] = ..., message: _Optional[str] = ...) -> None: ...

class PredictResponse(_message.Message):
    __slots__ = ("model_id", "columns", "results")
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    columns: _containers.RepeatedScalarFieldContainer[str]
    results: _containers.RepeatedCompositeFieldContainer[IdScore]
    def __init__(self, model_id: _Optional[str] = ..., columns: _Optional[_Iterable[str]] = ..., results: _Optional[_Iterable[_Union[IdScore, _Mapping]]] = ...) -> None: ...

class OpenScoringRequest(_message.Message):
    __slots__ = ("model_id", "session_id", "reply_to")
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    REPLY_TO_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    session_id: str
    reply_to: str
    def __init__(self, model_id: _Optional[str] = ..., session_id: _Optional[str] = ..., reply_to: _Optional[str] = ...) -> None: ...

class OpenScoringResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CloseScoringRequest(_message.Message):
    __slots__ = ("session_id", "reason")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    reason: str
    def __init__(self, session_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class CloseScoringResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CheckPeersRequest(_message.Message):
    __slots__ = ("peers",)
    PEERS_FIELD_NUMBER: _ClassVar[int]
    peers: _containers.RepeatedCompositeFieldContainer[PeerAddress]
    def __init__(self, peers: _Optional[_Iterable[_Union[PeerAddress, _Mapping]]] = ...) -> None: ...

class PeerCheck(_message.Message):
    __slots__ = ("party_id", "address", "error", "seconds")
    PARTY_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    party_id: str
    address: str
    error: str
    seconds: float
    def __init__(self, party_id: _Optional[str] = ..., address: _Optional[str] = ..., error: _Optional[str] = ..., seconds: _Optional[float] = ...) -> None: ...

class CheckPeersResponse(_message.Message):
    __slots__ = ("peers",)
    PEERS_FIELD_NUMBER: _ClassVar[int]
    peers: _containers.RepeatedCompositeFieldContainer[PeerCheck]
    def __init__(self, peers: _Optional[_Iterable[_Union[PeerCheck, _Mapping]]] = ...) -> None: ...
