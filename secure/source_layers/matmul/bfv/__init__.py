"""The MatMul source layer over exact BFV (`crypto: {scheme: bfv}`): the same shares and
messages as the Paillier layer (`source_layers.matmul`), with coefficient-encoded
products (`lattice.layout`), noise flooding of every ciphertext that returns to its key's
owner, and a refresh of [[V_A]] after each update.

    ActiveBfvLayer    the active party B (`active`, which lists the messages)
    PassiveBfvLayer   a passive party A (K = 1)
"""

from vfl.secure.source_layers.matmul.bfv.active import ActiveBfvLayer
from vfl.secure.source_layers.matmul.bfv.passive import PassiveBfvLayer

__all__ = ["ActiveBfvLayer", "PassiveBfvLayer"]
