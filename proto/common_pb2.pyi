from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Tensor(_message.Message):
    __slots__ = ("dtype", "shape", "data")
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    dtype: str
    shape: _containers.RepeatedScalarFieldContainer[int]
    data: bytes
    def __init__(self, dtype: _Optional[str] = ..., shape: _Optional[_Iterable[int]] = ..., data: _Optional[bytes] = ...) -> None: ...

class Ciphertexts(_message.Message):
    __slots__ = ("width", "shape", "blob", "slots", "scale_bits", "key_owner")
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    BLOB_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    SCALE_BITS_FIELD_NUMBER: _ClassVar[int]
    KEY_OWNER_FIELD_NUMBER: _ClassVar[int]
    width: int
    shape: _containers.RepeatedScalarFieldContainer[int]
    blob: bytes
    slots: int
    scale_bits: int
    key_owner: str
    def __init__(self, width: _Optional[int] = ..., shape: _Optional[_Iterable[int]] = ..., blob: _Optional[bytes] = ..., slots: _Optional[int] = ..., scale_bits: _Optional[int] = ..., key_owner: _Optional[str] = ...) -> None: ...

class PublicKey(_message.Message):
    __slots__ = ("n", "owner")
    N_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    n: bytes
    owner: str
    def __init__(self, n: _Optional[bytes] = ..., owner: _Optional[str] = ...) -> None: ...

class Indices(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    def __init__(self, data: _Optional[bytes] = ...) -> None: ...

class EcPoints(_message.Message):
    __slots__ = ("curve", "count", "blob", "blinded_by")
    CURVE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    BLOB_FIELD_NUMBER: _ClassVar[int]
    BLINDED_BY_FIELD_NUMBER: _ClassVar[int]
    curve: str
    count: int
    blob: bytes
    blinded_by: str
    def __init__(self, curve: _Optional[str] = ..., count: _Optional[int] = ..., blob: _Optional[bytes] = ..., blinded_by: _Optional[str] = ...) -> None: ...

class Control(_message.Message):
    __slots__ = ("fields",)
    class FieldsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    fields: _containers.ScalarMap[str, str]
    def __init__(self, fields: _Optional[_Mapping[str, str]] = ...) -> None: ...

class Payload(_message.Message):
    __slots__ = ("tensor", "ciphertexts", "public_key", "indices", "control", "ec_points")
    TENSOR_FIELD_NUMBER: _ClassVar[int]
    CIPHERTEXTS_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    INDICES_FIELD_NUMBER: _ClassVar[int]
    CONTROL_FIELD_NUMBER: _ClassVar[int]
    EC_POINTS_FIELD_NUMBER: _ClassVar[int]
    tensor: Tensor
    ciphertexts: Ciphertexts
    public_key: PublicKey
    indices: Indices
    control: Control
    ec_points: EcPoints
    def __init__(self, tensor: _Optional[_Union[Tensor, _Mapping]] = ..., ciphertexts: _Optional[_Union[Ciphertexts, _Mapping]] = ..., public_key: _Optional[_Union[PublicKey, _Mapping]] = ..., indices: _Optional[_Union[Indices, _Mapping]] = ..., control: _Optional[_Union[Control, _Mapping]] = ..., ec_points: _Optional[_Union[EcPoints, _Mapping]] = ...) -> None: ...
