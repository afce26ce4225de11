"""protocol: blindfl with `crypto: {scheme: bfv}` end to end over the in-process channel:
the BFV MatMul layer trains the model Paillier trains (same AUC within fixed point)."""

from __future__ import annotations

import pytest
from vfl.contract.errors import SpecError

from tests.party.test_blindfl_training import breast_spec
from tests.support.data import breast
from tests.support.harness import run_inprocess

pytest.importorskip("tenseal")

BFV = {"key_bits": 512, "allow_insecure_test_keys": True, "scheme": "bfv"}


def test_bfv_reaches_the_paillier_auc_on_breast() -> None:
    train = {"epochs": 3, "batch_size": 64, "lr": 0.05, "seed": 3}
    paillier = run_inprocess(breast_spec("blindfl", train=train), breast())["bank"]
    bfv = run_inprocess(breast_spec("blindfl", train=train, crypto=BFV), breast())["bank"]
    assert bfv["metrics"]["auc"] >= 0.98
    assert abs(bfv["metrics"]["auc"] - paillier["metrics"]["auc"]) <= 0.005


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({"protocol": "split"}, "protocol: blindfl"),
        ({"local_updates": {"mode": "celu"}}, "local updates"),
    ],
)
def test_what_bfv_does_not_support_yet_is_refused_naming_the_field(extra, words) -> None:
    protocol = extra.pop("protocol", "blindfl")
    with pytest.raises(SpecError, match="crypto") as info:
        breast_spec(protocol, crypto=BFV, **extra)
    assert words in str(info.value)


def test_paillier_stays_the_default() -> None:
    assert breast_spec("blindfl").crypto.scheme == "paillier"


def test_a_feature_beyond_the_bfv_range_is_refused_before_keys_naming_the_column() -> None:
    from types import SimpleNamespace

    import numpy as np
    from vfl.party.errors import JobError
    from vfl.party.training.blindfl.common import check_bfv_range
    from vfl.party.training.inputs import Inputs
    from vfl.secure.config import SecureConfig

    spec = breast_spec("blindfl", crypto=BFV)
    ctx = SimpleNamespace(spec=spec, party_id="shop")
    x = np.zeros((5, 3), dtype=np.float32)
    x[2, 1] = 300.0
    config = SecureConfig(key_bits=512, allow_insecure_test_keys=True)
    with pytest.raises(JobError, match="column 1 reaches 300"):
        check_bfv_range(ctx, Inputs(x, None, ()), config)
    check_bfv_range(ctx, Inputs(x / 10, None, ()), config)  # within +-128
