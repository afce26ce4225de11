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
    __slots__ = ("n", "owner", "h_s", "scheme", "g", "h")
    N_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    H_S_FIELD_NUMBER: _ClassVar[int]
    SCHEME_FIELD_NUMBER: _ClassVar[int]
    G_FIELD_NUMBER: _ClassVar[int]
    H_FIELD_NUMBER: _ClassVar[int]
    n: bytes
    owner: str
    h_s: bytes
    scheme: str
    g: bytes
    h: bytes
    def __init__(self, n: _Optional[bytes] = ..., owner: _Optional[str] = ..., h_s: _Optional[bytes] = ..., scheme: _Optional[str] = ..., g: _Optional[bytes] = ..., h: _Optional[bytes] = ...) -> None: ...

class Indices(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    def __init__(self, data: _Optional[bytes] = ...) -> None: ...

class Ids(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, values: _Optional[_Iterable[str]] = ...) -> None: ...

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

class MatMulSetup(_message.Message):
    __slots__ = ("out_dim", "active_in_dim", "active_feature_bits", "output_bits", "slot_bits", "stat_bits", "key_bits", "rows_per_cipher", "passive_ids")
    OUT_DIM_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_IN_DIM_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_FEATURE_BITS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_BITS_FIELD_NUMBER: _ClassVar[int]
    SLOT_BITS_FIELD_NUMBER: _ClassVar[int]
    STAT_BITS_FIELD_NUMBER: _ClassVar[int]
    KEY_BITS_FIELD_NUMBER: _ClassVar[int]
    ROWS_PER_CIPHER_FIELD_NUMBER: _ClassVar[int]
    PASSIVE_IDS_FIELD_NUMBER: _ClassVar[int]
    out_dim: int
    active_in_dim: int
    active_feature_bits: int
    output_bits: int
    slot_bits: int
    stat_bits: int
    key_bits: int
    rows_per_cipher: int
    passive_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, out_dim: _Optional[int] = ..., active_in_dim: _Optional[int] = ..., active_feature_bits: _Optional[int] = ..., output_bits: _Optional[int] = ..., slot_bits: _Optional[int] = ..., stat_bits: _Optional[int] = ..., key_bits: _Optional[int] = ..., rows_per_cipher: _Optional[int] = ..., passive_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class EmbedSetup(_message.Message):
    __slots__ = ("out_dim", "emb_dim", "feature_bits", "output_bits", "slot_bits", "stat_bits", "key_bits", "passive_ids")
    OUT_DIM_FIELD_NUMBER: _ClassVar[int]
    EMB_DIM_FIELD_NUMBER: _ClassVar[int]
    FEATURE_BITS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_BITS_FIELD_NUMBER: _ClassVar[int]
    SLOT_BITS_FIELD_NUMBER: _ClassVar[int]
    STAT_BITS_FIELD_NUMBER: _ClassVar[int]
    KEY_BITS_FIELD_NUMBER: _ClassVar[int]
    PASSIVE_IDS_FIELD_NUMBER: _ClassVar[int]
    out_dim: int
    emb_dim: int
    feature_bits: int
    output_bits: int
    slot_bits: int
    stat_bits: int
    key_bits: int
    passive_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, out_dim: _Optional[int] = ..., emb_dim: _Optional[int] = ..., feature_bits: _Optional[int] = ..., output_bits: _Optional[int] = ..., slot_bits: _Optional[int] = ..., stat_bits: _Optional[int] = ..., key_bits: _Optional[int] = ..., passive_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class MatMulInputs(_message.Message):
    __slots__ = ("in_dim", "feature_bits", "key_bits")
    IN_DIM_FIELD_NUMBER: _ClassVar[int]
    FEATURE_BITS_FIELD_NUMBER: _ClassVar[int]
    KEY_BITS_FIELD_NUMBER: _ClassVar[int]
    in_dim: int
    feature_bits: int
    key_bits: int
    def __init__(self, in_dim: _Optional[int] = ..., feature_bits: _Optional[int] = ..., key_bits: _Optional[int] = ...) -> None: ...

class EmbedInputs(_message.Message):
    __slots__ = ("vocab_sizes", "key_bits")
    VOCAB_SIZES_FIELD_NUMBER: _ClassVar[int]
    KEY_BITS_FIELD_NUMBER: _ClassVar[int]
    vocab_sizes: _containers.RepeatedScalarFieldContainer[int]
    key_bits: int
    def __init__(self, vocab_sizes: _Optional[_Iterable[int]] = ..., key_bits: _Optional[int] = ...) -> None: ...

class InputLayout(_message.Message):
    __slots__ = ("dense", "vocab_sizes")
    DENSE_FIELD_NUMBER: _ClassVar[int]
    VOCAB_SIZES_FIELD_NUMBER: _ClassVar[int]
    dense: int
    vocab_sizes: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, dense: _Optional[int] = ..., vocab_sizes: _Optional[_Iterable[int]] = ...) -> None: ...

class BucketLayout(_message.Message):
    __slots__ = ("values", "scale_bits", "value_bits", "rows")
    VALUES_FIELD_NUMBER: _ClassVar[int]
    SCALE_BITS_FIELD_NUMBER: _ClassVar[int]
    VALUE_BITS_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    values: int
    scale_bits: int
    value_bits: int
    rows: int
    def __init__(self, values: _Optional[int] = ..., scale_bits: _Optional[int] = ..., value_bits: _Optional[int] = ..., rows: _Optional[int] = ...) -> None: ...

class LayerSetup(_message.Message):
    __slots__ = ("matmul", "embed", "matmul_inputs", "embed_inputs", "layout", "buckets")
    MATMUL_FIELD_NUMBER: _ClassVar[int]
    EMBED_FIELD_NUMBER: _ClassVar[int]
    MATMUL_INPUTS_FIELD_NUMBER: _ClassVar[int]
    EMBED_INPUTS_FIELD_NUMBER: _ClassVar[int]
    LAYOUT_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    matmul: MatMulSetup
    embed: EmbedSetup
    matmul_inputs: MatMulInputs
    embed_inputs: EmbedInputs
    layout: InputLayout
    buckets: BucketLayout
    def __init__(self, matmul: _Optional[_Union[MatMulSetup, _Mapping]] = ..., embed: _Optional[_Union[EmbedSetup, _Mapping]] = ..., matmul_inputs: _Optional[_Union[MatMulInputs, _Mapping]] = ..., embed_inputs: _Optional[_Union[EmbedInputs, _Mapping]] = ..., layout: _Optional[_Union[InputLayout, _Mapping]] = ..., buckets: _Optional[_Union[BucketLayout, _Mapping]] = ...) -> None: ...

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

class Ping(_message.Message):
    __slots__ = ("nonce",)
    NONCE_FIELD_NUMBER: _ClassVar[int]
    nonce: bytes
    def __init__(self, nonce: _Optional[bytes] = ...) -> None: ...

class Payload(_message.Message):
    __slots__ = ("tensor", "ciphertexts", "public_key", "indices", "control", "ec_points", "layer_setup", "ids", "ping")
    TENSOR_FIELD_NUMBER: _ClassVar[int]
    CIPHERTEXTS_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    INDICES_FIELD_NUMBER: _ClassVar[int]
    CONTROL_FIELD_NUMBER: _ClassVar[int]
    EC_POINTS_FIELD_NUMBER: _ClassVar[int]
    LAYER_SETUP_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    PING_FIELD_NUMBER: _ClassVar[int]
    tensor: Tensor
    ciphertexts: Ciphertexts
    public_key: PublicKey
    indices: Indices
    control: Control
    ec_points: EcPoints
    layer_setup: LayerSetup
    ids: Ids
    ping: Ping
    def __init__(self, tensor: _Optional[_Union[Tensor, _Mapping]] = ..., ciphertexts: _Optional[_Union[Ciphertexts, _Mapping]] = ..., public_key: _Optional[_Union[PublicKey, _Mapping]] = ..., indices: _Optional[_Union[Indices, _Mapping]] = ..., control: _Optional[_Union[Control, _Mapping]] = ..., ec_points: _Optional[_Union[EcPoints, _Mapping]] = ..., layer_setup: _Optional[_Union[LayerSetup, _Mapping]] = ..., ids: _Optional[_Union[Ids, _Mapping]] = ..., ping: _Optional[_Union[Ping, _Mapping]] = ...) -> None: ...
