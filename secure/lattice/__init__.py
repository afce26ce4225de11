"""Lattice (BFV) primitives for the secure source layers: pure, no I/O beyond the
in-memory file SEAL's binding needs, no grpc.

    vfl.secure.lattice.params    BfvParams and the 128-bit security check
    vfl.secure.lattice.bfv       keys, encryption, plaintext products, noise flooding
    vfl.secure.lattice.layout    coefficient (Cheetah-style) layouts of matrix products
    vfl.secure.lattice.seal_io   SEAL objects to and from bytes and numpy arrays
"""

from vfl.secure.lattice.bfv import BfvContext, KeyPair, PeerKey
from vfl.secure.lattice.params import BfvParams

__all__ = ["BfvContext", "BfvParams", "KeyPair", "PeerKey"]
