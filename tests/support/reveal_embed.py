"""TESTS ONLY: the plaintext tables Q and weights W an Embed-MatMul layer is equivalent to.

Reconstruction needs every party's private state in one process (A's Q^A and private key,
B's private key), which never happens outside a test. Nothing here is sent anywhere.
"""

from __future__ import annotations

import numpy as np
from vfl.secure.paillier.encoding import decode
from vfl.secure.paillier.engine import Paillier
from vfl.secure.source_layers.common import flat, shaped
from vfl.secure.source_layers.embed.active import ActiveEmbedLayer
from vfl.secure.source_layers.embed.passive import PassiveEmbedLayer


def reveal_embed_for_tests(
    active: ActiveEmbedLayer, passives: list[PassiveEmbedLayer]
) -> dict[str, object]:
    """Per passive party <id>: "Q/<id>" (list of V_f x k tables), "W/<id>" (from A's
    [[W]]_B), and B's two copies "W_copy/<id>" ([[W]]_A) and "W_T_copy/<id>" ([[W^T]]_A)."""
    own_b = active._crypto.own  # noqa: SLF001 - test helper
    out: dict[str, object] = {}
    for passive in passives:
        pid, st = passive.channel.party_id, passive._require_setup()  # noqa: SLF001
        own_a = passive._crypto.own  # noqa: SLF001
        link = active._links[pid]  # noqa: SLF001
        prm = st.params
        out[f"Q/{pid}"] = [
            decode(q_a, prm.feature_bits) + _table(own_b, st, f) for f, q_a in enumerate(st.q_a)
        ]
        f_w, h_lay = prm.weight_bits, st.h_lay
        out[f"W/{pid}"] = decode(np.array(_plain(own_b, st.w_b, h_lay), dtype=float), f_w)
        out[f"W_copy/{pid}"] = decode(np.array(_plain(own_a, link.w_a, h_lay), dtype=float), f_w)
        w_t = np.array(_plain(own_a, link.wt_a, link.d_lay), dtype=float)
        out[f"W_T_copy/{pid}"] = decode(w_t.T, f_w)
    return out


def _plain(he: Paillier, rows: list, layout) -> list[list[int]]:
    return layout.unpack(shaped(he.decrypt(flat(rows)), len(rows[0])))


def _table(he: Paillier, st, f: int) -> np.ndarray:
    """Decrypt the stored [[Q^B_f]] rows (one ciphertext per segment)."""
    layout = st.q_b.layout
    segments = layout.segments[f]
    rows = []
    for stored in st.q_b.tables[f]:
        values: list[int] = []
        for value, seg in zip(he.decrypt(stored), segments, strict=True):
            values.extend(layout.unpack_segment(value, seg))
        rows.append(values)
    return decode(np.array(rows, dtype=float), st.params.feature_bits)
