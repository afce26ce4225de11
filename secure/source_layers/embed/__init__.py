"""The BlindFL Embed-MatMul source layer for categorical fields (docs/protocols.md §5).

For each passive party A_k with fields f (vocabulary V_f, codes known only to A_k):
    E = [Q_1[x_1] .. Q_F[x_F]] (N x F*k),   Z_emb = sum_k E_k W_k (N x h)
B adds Z_emb to the Z of its MatMul layer. The state is shared, never in one place:

    Q = Q^A + Q^B   A holds Q^A (fixed) and [[Q^B]]_B, which absorbs every update
    W               A holds [[W]]_B; B holds [[W]]_A and [[W^T]]_A (its transpose,
                    packed along F*k, for lr G W^T); neither holds W in plaintext

    ActiveEmbedLayer   party B, holds G                 (`embed.active`)
    PassiveEmbedLayer  party A_k, holds codes           (`embed.passive`)
    B's state and steps for one passive party           (`embed.link`)
    A's encrypted tables [[Q^B]]: lookups, updates      (`embed.tables`)
    parameters, scales and layouts                      (`embed.setup`, `embed.packing`)
    input checks and ciphertext helpers of both roles   (`embed.common`)

Messages per step (per passive party; see the two role modules): forward e (A -> B),
c (B -> A), z (A -> B); backward m3, pb, de, st (B -> A), then y, phi, phit (A -> B).
Every payload is a public key, a control message of sizes and scales (setup only), or
ciphertexts.

Departures from the textbook Embed-MatMul protocol, and why:
- The plaintext shares Q^A and W^A/W^B of 1.3.2 would absorb a statistical mask at
  every update (dE and dW reach the parties as masked shares), growing by ~40 bits per
  step and overflowing every slot. Here masks cancel inside ciphertexts instead:
  [[Q^B]] absorbs the whole step -round(P/2^t) + [[-round(S/2^t)]] (P = dE - S decrypted
  by A), W lives only encrypted, and the masked shares are used once and dropped.
- Q's scale f_E and W's scale f_W = f_E + f_G cannot both be kept by lr G W^T (scale
  f_G + f_W), so dE is truncated by local rounding of the two masked shares: an error
  of at most one unit of 2^-f_E per looked-up entry and step.

What is revealed: B learns Z_emb (the sum over passive parties: each z_k carries a
pairwise zero-sum mask when K >= 2, as in the MatMul layer), and sizes (N, F*k per party).
A learns sizes only. B does not learn which rows of Q changed; A never sees G. Output
leakage as in docs/security.md remains, and B learns Z_emb separately from the MatMul
layer's Z.

Cost per step (N=256, F=26, k=8, h=32, 2048-bit keys, one passive party): 14,400
ciphertexts (7.4 MB): e 1792, c 512, z 512, m3 512, pb 416, de 2816, st 6656 (one per
row and field: the price of scatter-adding into per-field tables), y/phi 416 each, phit
352. Measured single-core CPU: A 22 s + 4 s of r^n, B 15 s + 9 s of r^n (fixed-base
obfuscators, precomputable while waiting); decryptions and the three products with
62-bit masked exponents (E'_A W, E'_B W, E'_A^T G) dominate.

Precision and bounds: Q at 2^-f_E (2^-16), |Q share| < 2^(20 - f_E) (16); W at 2^-f_W
(2^-36); lr G at 2^-f_G (2^-20); dW, dE and |W| read back below 2^(slot_bits-1) at
their scales (|dE| < 32, |dW| < 2^25). Masks are uniform over the masked value's slot
width plus stat_bits, or over the whole packed row (c) when it is not read slot-wise.
"""

from __future__ import annotations

from vfl.secure.config import SecureConfig
from vfl.secure.source_layers.embed.active import ActiveEmbedLayer
from vfl.secure.source_layers.embed.common import VocabularyError
from vfl.secure.source_layers.embed.passive import PassiveEmbedLayer

__all__ = ["ActiveEmbedLayer", "PassiveEmbedLayer", "SecureConfig", "VocabularyError"]
