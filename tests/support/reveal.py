"""TESTS ONLY: the plaintext weights a trained source layer is equivalent to.

Reconstructing W needs every party's private state in one process (the passive parties'
plaintext shares and the active party's private key), which never happens outside a
test. Nothing here is ever sent over a channel.
"""

from __future__ import annotations

import numpy as np
from vfl.secure.paillier.encoding import decode
from vfl.secure.source_layers.common import flat, shaped
from vfl.secure.source_layers.matmul.active import ActiveSourceLayer
from vfl.secure.source_layers.matmul.passive import PassiveSourceLayer


def reveal_weights_for_tests(
    active: ActiveSourceLayer, passives: list[PassiveSourceLayer]
) -> dict[str, np.ndarray]:
    """{"W_B": V_B + sum_k U_B^k, "bias": b, "W_A/<id>": U_A + Dec(V_A)} (float64)."""
    own = active._crypto.own  # noqa: SLF001 - test helper
    weights = {"bias": active._bias.copy(), "W_B": active._v_b.copy()}  # noqa: SLF001
    for passive in passives:
        state = passive._require_setup()  # noqa: SLF001
        weights["W_B"] = weights["W_B"] + state.u_b
        enc = state.v_a
        plain = own.decrypt(flat(enc.rows))
        v_a = decode(state.packer.unpack(shaped(plain, enc.cols), passive.out_dim), enc.scale_bits)
        weights[f"W_A/{passive.channel.party_id}"] = state.u_a + v_a
    return weights
