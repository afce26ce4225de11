"""Gradient-boosted trees over the in-process channel (parties as threads): the same trees
as LightGBM when binning is exact, every task, one active and two passive parties, empty
cells and words, early stopping, prediction with the stored parts, importance, a resumed
job equal to an uninterrupted one, and a malformed histogram named."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from vfl.contract.spec import JobSpec, TableSource, parse_spec
from vfl.contract.spec.predict import PredictSpec
from vfl.party.kinds.trees import importance_by_name
from vfl.party.state import StateDir
from vfl.party.state.model_store import ModelStore
from vfl.party.training.trees.histograms import PlainHistograms
from vfl.secure.channel import InProcessHub
from vfl.secure.errors import ChannelClosed, PayloadError
from vfl.secure.wire.payload import tensor_to_payload

from bench.credit_data import credit_held_out
from tests.support.data import breast, motor, shared_data
from tests.support.harness import run_inprocess

PAIR = (("bank", "active"), ("shop", "passive"))


def trees_spec(trees: dict, parties=PAIR, test: bool = False, **sections) -> JobSpec:
    data = {"dataset": "d", **({"test_dataset": "t"} if test else {})}
    return parse_spec(
        {
            "job": "trees",
            "parties": [{"id": p, "role": r, "data": data} for p, r in parties],
            "model": {"trees": trees},
            **sections,
        }
    )


def held_out(folder: Path, rows: int, seed: int, step: float | None = None):
    tables, pooled = credit_held_out(folder, rows, seed, step=step)
    datasets = {
        p: {"d": table, "t": table.model_copy(update={"path": test})}
        for p, (table, test) in tables.items()
    }
    return datasets, pooled


def test_with_exact_bins_the_trees_are_lightgbms(tmp_path) -> None:
    # Prepare: features of 31 values at most (every binning exact), held-out rows
    trees = {"count": 6, "depth": 3, "bins": 32, "learning_rate": 0.3, "l2": 1.0}
    datasets, pooled = held_out(tmp_path, 1200, seed=5, step=0.25)
    lightgbm = pytest.importorskip("bench.trees", reason="the baseline needs lightgbm")
    pytest.importorskip("lightgbm", reason="the baseline is LightGBM (pip install lightgbm)")
    # Execute
    bank = run_inprocess(trees_spec(trees, test=True), datasets)["bank"]
    theirs = lightgbm.lightgbm_margins(pooled["x"], pooled["y"], pooled["x_test"], trees)
    # Assert: per held-out row, the same margin (LightGBM sums float32 gradients)
    by_id = dict(zip(pooled["ids_test"], theirs, strict=True))
    ours = bank["validation_outputs"][:, 0]
    expected = np.array([by_id[i] for i in bank["validation_ids"]])
    assert np.max(np.abs(ours - expected)) < 1e-4


def test_multiclass_grows_one_tree_per_class_a_round(tmp_path) -> None:
    datasets = {
        "a": {
            "d": TableSource(
                path=str(shared_data("fate", "vehicle_scale_hetero_guest.csv")), label="y"
            )
        },
        "b": {"d": TableSource(path=str(shared_data("fate", "vehicle_scale_hetero_host.csv")))},
    }
    spec = trees_spec(
        {"task": "multiclass", "count": 12, "depth": 3}, (("a", "active"), ("b", "passive"))
    )
    states = {p: StateDir(tmp_path / p) for p in ("a", "b")}
    result = run_inprocess(spec, datasets, states=states)["a"]
    assert result["metrics"]["accuracy"] >= 0.7
    _, part = ModelStore(states["a"]).load("job", "a")
    assert len(part["forest"]["rounds"]) == 12
    assert {len(trees) for trees in part["forest"]["rounds"]} == {4}


def test_three_parties_regression_with_subsample_and_early_stopping(tmp_path) -> None:
    # Prepare
    trees = {"task": "regression", "count": 40, "depth": 4, "learning_rate": 0.5}
    trees |= {"subsample": 0.7, "early_stopping": 2}
    parties = (("plant", "active"), ("s1", "passive"), ("s2", "passive"))
    states = {p: StateDir(tmp_path / p) for p, _ in parties}
    spec = trees_spec(trees, parties, validation={"fraction": 0.3})
    # Execute
    result = run_inprocess(spec, motor(), states=states)
    # Assert: stopped two rounds after its best validation loss, which it keeps
    plant = result["plant"]
    assert plant["metrics"]["r2"] >= 0.9
    assert plant["trees"] < plant["rounds"] < 40 and plant["rounds"] - plant["trees"] == 2
    assert plant["metrics"] == {
        k: v for k, v in plant["history"][plant["trees"] - 1].items() if k in ("rmse", "r2")
    }
    parts = {p: ModelStore(states[p]).load("job", p)[1] for p, _ in parties}
    assert len(parts["plant"]["forest"]["rounds"]) == plant["trees"]
    for passive in ("s1", "s2"):
        assert max(parts[passive]["splits"]["round"], default=0) <= plant["trees"]
        assert result[passive]["trees"] == plant["trees"]
    # Assert: each party sees its own columns' importance; the active party per-party totals
    shown = {p: importance_by_name(parts[p]) for p, _ in parties}
    assert set(shown["plant"]["parties"]) == {"s1", "s2"}
    for passive in ("s1", "s2"):
        own = shown[passive]["columns"]
        assert (
            sum(c["splits"] for c in own.values()) == shown["plant"]["parties"][passive]["splits"]
        )
        assert sum(c["gain"] for c in own.values()) == pytest.approx(
            shown["plant"]["parties"][passive]["gain"]
        )
        assert "parties" not in shown[passive]
    assert set(shown["plant"]["columns"]) == {"pm", "stator_yoke", "stator_tooth", "stator_winding"}
    # Assert: the kept rounds, scored with the stored parts, give what validation gave
    request = PredictSpec(model="job", data={"plant": "d", "s1": "d", "s2": "d"})
    run_inprocess(spec.for_prediction(request), motor(), states=states)
    with (states["plant"].root / "predictions" / "predict.csv").open() as fh:
        values = {row["id"]: float(row["value"]) for row in csv.DictReader(fh)}
    task = ModelStore(states["plant"]).manifest("job", "plant").task
    assert task is not None
    expected = task.scores(plant["validation_outputs"])["value"]
    for row_id, value in zip(plant["validation_ids"], expected, strict=True):
        assert values[row_id] == pytest.approx(value, abs=1e-9)


def test_empty_cells_and_words_at_a_passive_party_are_split_on(tmp_path) -> None:
    # Prepare: the label follows whether the shop's amount is empty, and its city
    rng = np.random.default_rng(3)
    n = 1200
    empty, city = rng.random(n) < 0.3, rng.choice(["paris", "lyon", "nice"], n)
    y = ((empty | (city == "nice")) ^ (rng.random(n) < 0.05)).astype(int)
    bank = ["id,y,noise", *(f"{i},{y[i]},{rng.normal():.4f}" for i in range(n))]
    shop = ["id,amount,city"]
    shop += [f"{i},{'' if empty[i] else round(rng.lognormal(8, 1), 2)},{city[i]}" for i in range(n)]
    (tmp_path / "bank.csv").write_text("\n".join(bank) + "\n")
    (tmp_path / "shop.csv").write_text("\n".join(shop) + "\n")
    datasets = {
        "bank": {"d": TableSource(path=str(tmp_path / "bank.csv"), label="y")},
        "shop": {"d": TableSource(path=str(tmp_path / "shop.csv"))},
    }
    # Execute
    result = run_inprocess(trees_spec({"count": 10, "depth": 2, "learning_rate": 0.5}), datasets)
    # Assert
    assert result["bank"]["metrics"]["auc"] >= 0.93
    assert result["shop"]["importance"]["splits"][0] >= 1  # amount (its empty cells)
    assert result["shop"]["importance"]["splits"][1] >= 1  # city


def test_a_prediction_scores_as_the_trained_model_validated(tmp_path) -> None:
    # Prepare: a model validated on every row (the test rows are the training rows)
    spec = trees_spec({"count": 8, "depth": 3}, test=True)
    datasets = {p: {"d": t["d"], "t": t["d"]} for p, t in breast().items()}
    states = {p: StateDir(tmp_path / p) for p in ("bank", "shop")}
    bank = run_inprocess(spec, datasets, states=states)["bank"]
    # Execute
    request = PredictSpec(model="job", data={"bank": "d", "shop": "d"})
    got = run_inprocess(spec.for_prediction(request), datasets, states=states)
    # Assert: every row's score, exactly
    with (states["bank"].root / "predictions" / "predict.csv").open() as fh:
        rows = {row["id"]: float(row["score"]) for row in csv.DictReader(fh)}
    expected = 1 / (1 + np.exp(-bank["validation_outputs"][:, 0].astype(np.float64)))
    assert len(rows) == 569
    for row_id, p in zip(bank["validation_ids"], expected, strict=True):
        assert rows[row_id] == pytest.approx(p, abs=1e-12)
    assert got["bank"]["metrics"]["auc"] == pytest.approx(bank["metrics"]["auc"], abs=1e-12)
    manifests = {p: ModelStore(states[p]).manifest("job", p) for p in ("bank", "shop")}
    assert {(m.kind, m.protocol) for m in manifests.values()} == {("trees", "split")}
    assert manifests["bank"].task is not None and manifests["shop"].task is None


def test_a_resumed_job_ends_with_the_uninterrupted_model(tmp_path) -> None:
    # Prepare: checkpoints after every round; features.select's choice (WOE/IV, small
    # test keys) is part of each party's model, resumed or not
    spec = trees_spec(
        {"count": 8, "depth": 3, "subsample": 0.8},
        features={"select": {"top": 6}},
        crypto={"key_bits": 1024, "allow_insecure_test_keys": True},
    )
    whole = {p: StateDir(tmp_path / "whole" / p) for p in ("bank", "shop")}
    broken = {p: StateDir(tmp_path / "broken" / p) for p in ("bank", "shop")}
    uninterrupted = run_inprocess(spec, breast(), states=whole)
    hub = InProcessHub()

    def die(direction, sender, receiver, tag, data) -> None:
        if tag == "tree/r6/gh":
            hub.close("killed")

    # Execute: the run dies in round 6, then resumes after the checkpoint of round 5
    with pytest.raises(ChannelClosed):
        run_inprocess(spec, breast(), hook=die, states=broken, hub=hub)
    assert broken["bank"].rounds("job")[-1] == 5 == broken["shop"].rounds("job")[-1]
    resumed = run_inprocess(spec, breast(), states=broken, resume_round=5)
    # Assert: the same model at both parties, and the same validations
    for party in ("bank", "shop"):
        a = ModelStore(whole[party]).load("job", party)[1]
        b = ModelStore(broken[party]).load("job", party)[1]
        _assert_same(a, b)
    assert resumed["bank"]["metrics"] == uninterrupted["bank"]["metrics"]
    assert resumed["bank"]["history"][-1]["auc"] == uninterrupted["bank"]["history"][-1]["auc"]
    assert [h["round"] for h in resumed["bank"]["history"]] == list(range(1, 9))
    shop = ModelStore(broken["shop"]).load("job", "shop")[1]["selection"]
    assert len(shop["kept"]) == 6 and len(shop["dropped"]) == 14


def _assert_same(a, b) -> None:
    if isinstance(a, dict):
        assert set(a) == set(b)
        for key in a:
            _assert_same(a[key], b[key])
    elif isinstance(a, list | tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _assert_same(x, y)
    elif isinstance(a, np.ndarray):
        assert np.array_equal(a, b)
    else:
        assert a == b


def test_a_malformed_histogram_fails_the_job_naming_its_party(monkeypatch) -> None:
    def wrong(self, sums):  # one sum too few
        return tensor_to_payload(np.concatenate([np.zeros((0, 2)), *sums])[:-1])

    monkeypatch.setattr(PlainHistograms, "payload", wrong)
    with pytest.raises(PayloadError, match=r"party 'shop' sent a malformed tree/r1/d0/hist"):
        run_inprocess(trees_spec({"count": 2, "depth": 2}), breast())
