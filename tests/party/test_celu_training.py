"""CELU-VFL local updates in split training (in-process channel, fixed seeds)."""

from __future__ import annotations

import pytest
from vfl.celu.synth_ctr import CATEGORICAL_FIELDS, write_csv
from vfl.contract.spec import TableSource, parse_spec

from tests.support.data import FATE
from tests.support.harness import run_inprocess


@pytest.fixture(scope="module")
def ctr(tmp_path_factory) -> dict[str, dict[str, TableSource]]:
    out = tmp_path_factory.mktemp("ctr")
    write_csv(out, 10_000, seed=0, vocab=20)
    return {
        "adv": {"d": TableSource(path=str(out / "active.csv"), label="y")},
        "pub": {"d": TableSource(path=str(out / "passive.csv"), categorical=CATEGORICAL_FIELDS)},
    }


def ctr_spec(local_updates: dict) -> object:
    return parse_spec(
        {
            "job": "ctr",
            "parties": [
                {"id": "adv", "role": "active", "data": {"dataset": "d"}},
                {"id": "pub", "role": "passive", "data": {"dataset": "d"}},
            ],
            "model": {
                "source": {"out_dim": 32, "hidden": [64], "embedding_dim": 8},
                "top": {"hidden": [32]},
            },
            "local_updates": local_updates,
            "train": {"epochs": 3, "batch_size": 256, "lr": 0.02, "seed": 0},
            "validation": {"fraction": 0.1, "every": 5},
        }
    )


def rounds_to(history: list[dict], target: float) -> int | None:
    return next((h["round"] for h in history if h["auc"] >= target), None)


def test_celu_reaches_the_vanilla_auc_in_fewer_than_half_the_rounds(ctr) -> None:
    # Prepare
    vanilla = run_inprocess(ctr_spec({"mode": "none"}), ctr)["adv"]
    celu_spec = ctr_spec(
        {"mode": "celu", "workset": 5, "reuse": 8, "xi": 0.5, "schedule": "sync", "steps": 7}
    )
    # Execute
    celu = run_inprocess(celu_spec, ctr)["adv"]
    # Assert
    target = vanilla["metrics"]["auc"]
    assert celu["local_updates"] > 0
    assert rounds_to(celu["history"], target) is not None
    assert rounds_to(celu["history"], target) < rounds_to(vanilla["history"], target) / 2


def breast_spec(local_updates: dict) -> object:
    return parse_spec(
        {
            "job": "b",
            "parties": [
                {"id": "bank", "role": "active", "data": {"dataset": "d"}},
                {"id": "shop", "role": "passive", "data": {"dataset": "d"}},
            ],
            "model": {"source": {"out_dim": 8}, "top": {"hidden": [16]}},
            "local_updates": local_updates,
            "train": {"epochs": 4, "batch_size": 64, "seed": 1},
            "validation": {"every": 7},
        }
    )


BREAST = {
    "bank": {"d": TableSource(path=str(FATE / "breast_hetero_guest.csv"), label="y")},
    "shop": {"d": TableSource(path=str(FATE / "breast_hetero_host.csv"))},
}


def test_reuse_one_is_vanilla_exactly() -> None:
    vanilla = run_inprocess(breast_spec({"mode": "none"}), BREAST)["bank"]
    r1 = run_inprocess(breast_spec({"mode": "celu", "reuse": 1}), BREAST)["bank"]
    assert r1["local_updates"] == 0
    assert r1["metrics"] == vanilla["metrics"]
    strip = [{k: v for k, v in h.items() if "seconds" not in k} for h in r1["history"]]
    assert strip == [{k: v for k, v in h.items() if "seconds" not in k} for h in vanilla["history"]]


@pytest.mark.parametrize(
    "mode",
    [
        {"mode": "celu", "schedule": "async"},
        {"mode": "fedbcd", "steps": 2},
    ],
)
def test_local_update_modes_train(mode: dict) -> None:
    result = run_inprocess(breast_spec(mode), BREAST)
    assert result["bank"]["local_updates"] > 0 and result["shop"]["local_updates"] > 0
    assert result["bank"]["metrics"]["auc"] >= 0.97
