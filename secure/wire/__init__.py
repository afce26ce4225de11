"""Arrays, keys and ciphertexts as `Payload` protobufs, checked on the way in.

payload       tensors, control fields, layer setup messages, row indices and ids
keys          Paillier and Okamoto-Uchiyama public keys
ciphertexts   ciphertext matrices (`CipherMatrix`)
"""

from vfl.secure.wire.ciphertexts import ciphertexts_from_payload, ciphertexts_to_payload
from vfl.secure.wire.keys import (
    ou_public_key_from_payload,
    ou_public_key_to_payload,
    public_key_from_payload,
    public_key_to_payload,
)
from vfl.secure.wire.payload import (
    MAX_ID_CHARS,
    Payload,
    control_from_payload,
    control_to_payload,
    ids_from_payload,
    ids_to_payload,
    indices_from_payload,
    indices_to_payload,
    layer_setup_from_payload,
    layer_setup_to_payload,
    tensor_from_payload,
    tensor_to_payload,
)

__all__ = [
    "MAX_ID_CHARS",
    "Payload",
    "ciphertexts_from_payload",
    "ciphertexts_to_payload",
    "control_from_payload",
    "control_to_payload",
    "ids_from_payload",
    "ids_to_payload",
    "indices_from_payload",
    "indices_to_payload",
    "layer_setup_from_payload",
    "layer_setup_to_payload",
    "ou_public_key_from_payload",
    "ou_public_key_to_payload",
    "public_key_from_payload",
    "public_key_to_payload",
    "tensor_from_payload",
    "tensor_to_payload",
]
