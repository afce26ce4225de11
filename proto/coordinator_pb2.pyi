from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SubmitJobRequest(_message.Message):
    __slots__ = ("spec_yaml",)
    SPEC_YAML_FIELD_NUMBER: _ClassVar[int]
    spec_yaml: str
    def __init__(self, spec_yaml: _Optional[str] = ...) -> None: ...

class SubmitJobResponse(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

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
    state: str
    created_at: float
    updated_at: float
    reason: str
    def __init__(self, job_id: _Optional[str] = ..., name: _Optional[str] = ..., state: _Optional[str] = ..., created_at: _Optional[float] = ..., updated_at: _Optional[float] = ..., reason: _Optional[str] = ...) -> None: ...

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

class GetJobResponse(_message.Message):
    __slots__ = ("job", "result_json")
    JOB_FIELD_NUMBER: _ClassVar[int]
    RESULT_JSON_FIELD_NUMBER: _ClassVar[int]
    job: JobSummary
    result_json: str
    def __init__(self, job: _Optional[_Union[JobSummary, _Mapping]] = ..., result_json: _Optional[str] = ...) -> None: ...

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
    state: str
    def __init__(self, state: _Optional[str] = ...) -> None: ...

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

class ReportProgressRequest(_message.Message):
    __slots__ = ("job_id", "party_id", "event", "state", "payload_json")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PARTY_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_JSON_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    party_id: str
    event: str
    state: str
    payload_json: str
    def __init__(self, job_id: _Optional[str] = ..., party_id: _Optional[str] = ..., event: _Optional[str] = ..., state: _Optional[str] = ..., payload_json: _Optional[str] = ...) -> None: ...

class ReportProgressResponse(_message.Message):
    __slots__ = ("cancel",)
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    cancel: bool
    def __init__(self, cancel: _Optional[bool] = ...) -> None: ...
