"""The BlindFL MatMul source layer, Z = sum_k X_Ak W_Ak + X_B W_B + b (docs/protocols.md §4).

Weights are additively shared and never exist in one place:
    W_Ak = U_Ak + V_Ak   A_k holds U_Ak in plaintext and [[V_Ak]]_B,
    W_B = V_B + sum_k U_B^k   B holds V_B and every [[U_B^k]]_Ak; A_k holds U_B^k.
Per step: forward m1 (B -> A_k), m2 (A_k -> B); backward m3 = [[eta G D]]_B (B -> A_k;
D: B's per-column step sizes, `secure.source_layers.steps`).

    ActiveSourceLayer   party B, holds the labels             (`matmul.active`)
    PassiveSourceLayer  party A_k                              (`matmul.passive`)
    B's state and m1 for one passive party                     (`matmul.link`)
    setup messages and protocol parameters                     (`matmul.setup`)
    several batch rows per ciphertext of m1 and m2             (`matmul.row_packing`)
    m1 once per row of a set used again and again              (`matmul.row_shares`)

Aggregation over K >= 2 passive parties: each A_k adds a pairwise zero-sum mask to its
m2 (seeds relayed by B, encrypted under the receiving passive party's key), and B
decrypts only the homomorphic sum of all m2: it learns Z and nothing per party.

What is revealed: B learns Z for every batch; a passive party learns only sizes (batch
size, widths, B's feature count and scales). Output leakage remains as described in
docs/security.md (differences of Z over time for the same batch).

Precision (`SecureConfig`: each party's own f_X, the active party's f_Z and slots): a
party's features at 2^-f_X (default 2^-8; 0 for integer features), Z at 2^-f_Z (2^-33),
the weight shares over them at 2^-(f_Z - f_X) (2^-25) and its [[eta G]] at
2^-(f_Z - 2 f_X) (2^-17); |Z| and every term read back must stay below
2^(slot_bits - 1 - f_Z) (= 128 with the default 41-bit slots). A 2048-bit plaintext
holds 48 such slots beside the 40-bit statistical mask, so up to three rows of a
16-wide layer share one ciphertext of m1 and m2 (`rows_per_cipher`, chosen by the cost
model of `secure.source_layers.matmul.row_packing`).
"""

from __future__ import annotations

from vfl.secure.config import SecureConfig
from vfl.secure.source_layers.matmul.active import ActiveSourceLayer
from vfl.secure.source_layers.matmul.passive import PassiveSourceLayer

__all__ = ["ActiveSourceLayer", "PassiveSourceLayer", "SecureConfig"]
