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


@pytest.mark.slow
def test_categorical_fields_beside_dense_ones_train_with_bfv(tmp_path) -> None:
    """A passive party with dense and categorical columns: its dense ones go through the
    BFV MatMul layer, its categorical ones through the (Paillier) Embed-MatMul layer."""
    import numpy as np
    from vfl.contract.spec import TableSource, parse_spec

    rng = np.random.default_rng(7)
    rows = 900
    codes = rng.integers(0, 6, size=(rows, 2))
    dense = rng.normal(size=(rows, 3))
    effects = rng.normal(0, 1.5, size=(2, 6))
    logit = effects[np.arange(2), codes].sum(axis=1) + 1.5 * dense[:, 0]
    y = (rng.random(rows) < 1 / (1 + np.exp(-logit))).astype(int)
    ids = np.arange(rows)
    np.savetxt(tmp_path / "a.csv", np.column_stack([ids, y, rng.normal(size=rows)]),
               fmt=["%d", "%d", "%.5f"], delimiter=",", header="id,y,x", comments="")  # fmt: skip
    table = np.column_stack([ids, codes, dense])
    np.savetxt(tmp_path / "p.csv", table, fmt=["%d"] * 3 + ["%.5f"] * 3, delimiter=",",
               header="id,C1,C2,d1,d2,d3", comments="")  # fmt: skip
    datasets = {
        "adv": {"d": TableSource(path=str(tmp_path / "a.csv"), label="y")},
        "pub": {  # preprocess none: the codes go through embeddings as they are
            "d": TableSource(
                path=str(tmp_path / "p.csv"), categorical=("C1", "C2"), preprocess="none"
            )
        },
    }
    spec = parse_spec(
        {
            "job": "cat-bfv",
            "protocol": "blindfl",
            "crypto": BFV,
            "parties": [
                {"id": "adv", "role": "active", "data": {"dataset": "d"}},
                {"id": "pub", "role": "passive", "data": {"dataset": "d"}},
            ],
            "model": {"source": {"out_dim": 2, "embedding_dim": 2, "lr": 2.0}},
            "train": {"epochs": 3, "batch_size": 128, "lr": 0.1},
            "validation": {"every": 6},
        }
    )
    tags: set[tuple[str, str]] = set()

    def record(direction, sender, receiver, tag, data) -> None:
        if direction == "sent":
            tags.add((sender, tag.split("/")[-1] if tag.startswith("train/") else tag))

    result = run_inprocess(spec, datasets, hook=record)["adv"]
    aucs = [h["auc"] for h in result["history"]]
    assert aucs[-1] >= 0.7 and aucs[-1] > aucs[0] + 0.02, aucs
    assert {("adv", "src/pk"), ("pub", "src/u_b"), ("pub", "vr"), ("adv", "vc")} <= tags
    assert any(sender == "pub" and tag.startswith("emb") for sender, tag in tags), tags
