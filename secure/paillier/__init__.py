"""The Paillier engine: integers and arrays in, integers and arrays out.

    keys             key pairs (`generate_keypair`; `keypair_from_phe` wraps a phe key)
    engine           `Paillier`: encryption, CRT decryption, sums, re-randomisation
    encoding         signed fixed point and the packing of slots into one plaintext
    cipher_matrix    `CipherMatrix` and the blob form of ciphertext rows
    cipher_matmul    ciphertext matrix products (loads scipy: imported from its module)
    obfuscators      `ObfuscatorPool`: r^n values, fixed-base tables, background refill
    pool_cache       `PoolCache`: the pools a party daemon keeps across jobs
    counters         `OpCounts`: the homomorphic operations a party has done

The rest (fixed-base and short-exponent tables, multi-exponentiation, executor task
functions, helper processes) serves these. Nothing here loads the channel, the
generated messages or grpc.
"""

from vfl.secure.paillier.cipher_matrix import CipherMatrix, join_blob, split_blob
from vfl.secure.paillier.counters import OpCounts
from vfl.secure.paillier.encoding import Packer, decode, encode, to_signed
from vfl.secure.paillier.engine import Paillier
from vfl.secure.paillier.keys import (
    KeyPair,
    PrivateKey,
    PublicKey,
    generate_keypair,
    keypair_from_phe,
)
from vfl.secure.paillier.obfuscators import ObfuscatorPool
from vfl.secure.paillier.pool_cache import PoolCache

__all__ = [
    "CipherMatrix",
    "KeyPair",
    "ObfuscatorPool",
    "OpCounts",
    "Packer",
    "Paillier",
    "PoolCache",
    "PrivateKey",
    "PublicKey",
    "decode",
    "encode",
    "generate_keypair",
    "join_blob",
    "keypair_from_phe",
    "split_blob",
    "to_signed",
]
