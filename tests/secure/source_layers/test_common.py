"""What both source layers share: the values kept between a forward and its backward step,
and the pair seeds of the zero-sum masks (K >= 2 passive parties)."""

from __future__ import annotations

import pytest
from vfl.secure.errors import PayloadError, SecureError
from vfl.secure.paillier.cipher_matrix import CipherMatrix
from vfl.secure.paillier.engine import Paillier
from vfl.secure.source_layers.common import Pending
from vfl.secure.source_layers.seeds import seed_from_payload, seed_payload
from vfl.secure.source_layers.sharing import SEED_BYTES, new_seed
from vfl.secure.wire.ciphertexts import ciphertexts_to_payload


def test_pending_takes_the_step_by_tag_else_the_latest() -> None:
    pending: Pending[int] = Pending("run forward() first", keep=2)
    for step in range(3):
        pending.remember(f"s{step}", step)

    assert pending.take("s1") == 1
    assert pending.take("unknown") == 2  # the latest left
    with pytest.raises(SecureError, match=r"backward\('s0'\) has no forward step; run forward"):
        pending.take("s0")  # forgotten: only the last `keep` steps are kept


def test_a_pair_seed_round_trips_under_the_receivers_key(test_keys) -> None:
    own = Paillier(test_keys["A2"].public, test_keys["A2"].private)
    seed = new_seed()

    payload = seed_payload(seed, Paillier(test_keys["A2"].public))

    assert seed_from_payload(payload, own) == seed


def test_a_relayed_value_too_large_for_a_seed_is_rejected(test_keys) -> None:
    own = Paillier(test_keys["A2"].public, test_keys["A2"].private)
    value = own.encrypt([1 << (8 * SEED_BYTES)])
    payload = ciphertexts_to_payload(CipherMatrix([value], 1, own.pk, 1, 0))

    with pytest.raises(PayloadError, match="out of range"):
        seed_from_payload(payload, own)
