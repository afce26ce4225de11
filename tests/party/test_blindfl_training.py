"""protocol: blindfl end to end over the in-process channel (small TEST keys).

Lossless accuracy: with the same seed, blindfl reaches the metric split learning reaches
(docs/protocols.md §4); CELU local updates work on top of it (passive parties re-apply cached
encrypted derivatives).
"""

from __future__ import annotations

import numpy as np
import pytest
from vfl.contract.spec import TableSource, parse_spec

from bench.sparse_data import sparse_tables
from tests.support.blindfl_keys import new_keys, pin_keys, seeded_keys
from tests.support.data import breast, motor
from tests.support.harness import run_inprocess

TEST_CRYPTO = {"key_bits": 512, "allow_insecure_test_keys": True}  # INSECURE test keys


def breast_spec(protocol: str, **extra) -> object:
    return parse_spec(
        {
            "job": "t",
            "protocol": protocol,
            "crypto": TEST_CRYPTO,
            "parties": [
                {"id": "bank", "role": "active", "data": {"dataset": "d"}},
                {"id": "shop", "role": "passive", "data": {"dataset": "d"}},
            ],
            "model": {"source": {"out_dim": 4}, "top": {"hidden": [8]}},
            "train": {"epochs": 10, "batch_size": 64, "lr": 0.05, "seed": 3},
            "validation": {"fraction": 0.3, "every": 1000},
            **extra,
        }
    )


def test_blindfl_reaches_the_split_auc_on_breast() -> None:
    split = run_inprocess(breast_spec("split"), breast())["bank"]["metrics"]["auc"]
    blind = run_inprocess(breast_spec("blindfl"), breast())["bank"]["metrics"]["auc"]
    assert blind >= 0.99 and split >= 0.99
    assert abs(blind - split) <= 0.005


def test_statistical_obfuscators_train_the_same_model(monkeypatch) -> None:
    """Obfuscators change only the ciphertexts' randomness: with the same key pairs (the
    initial shares depend on them), `obfuscators: statistical` and the default `short`
    end with the same model."""
    pin_keys(monkeypatch, new_keys(["bank", "shop"], TEST_CRYPTO["key_bits"]))
    train = {"epochs": 2, "batch_size": 64, "lr": 0.05, "seed": 3}
    short = run_inprocess(breast_spec("blindfl", train=train), breast())["bank"]
    crypto = {**TEST_CRYPTO, "obfuscators": "statistical"}
    spec = breast_spec("blindfl", train=train, crypto=crypto)
    assert spec.crypto.obfuscators == "statistical"
    statistical = run_inprocess(spec, breast())["bank"]
    assert statistical["metrics"] == short["metrics"] and short["metrics"]["auc"] >= 0.9


def test_blindfl_with_celu_local_updates() -> None:
    spec = breast_spec("blindfl", local_updates={"mode": "celu", "schedule": "sync", "steps": 2})
    result = run_inprocess(spec, breast())
    assert result["shop"]["local_updates"] > 0 and result["bank"]["local_updates"] > 0
    assert result["bank"]["metrics"]["auc"] >= 0.98


def test_blindfl_three_parties_motor_regression() -> None:
    datasets = motor()
    spec = parse_spec(
        {
            "job": "m",
            "protocol": "blindfl",
            "crypto": TEST_CRYPTO,
            "parties": [
                {"id": "plant", "role": "active", "data": {"dataset": "d"}},
                {"id": "s1", "role": "passive", "data": {"dataset": "d"}},
                {"id": "s2", "role": "passive", "data": {"dataset": "d"}},
            ],
            "model": {"source": {"out_dim": 8}, "top": {"hidden": [16], "task": "regression"}},
            "train": {"epochs": 6, "batch_size": 64, "lr": 0.05},
            "validation": {"every": 1000},
        }
    )
    assert run_inprocess(spec, datasets)["plant"]["metrics"]["r2"] >= 0.85


def test_small_keys_need_the_named_test_setting() -> None:
    from vfl.contract.errors import SpecError

    with pytest.raises(SpecError, match="allow_insecure_test_keys"):
        parse_spec(
            {
                "parties": [
                    {"id": "a", "role": "active", "data": {"dataset": "d"}},
                    {"id": "b", "role": "passive", "data": {"dataset": "d"}},
                ],
                "protocol": "blindfl",
                "crypto": {"key_bits": 1024},
            }
        )


def categorical_job(tmp_path, protocol: str, vocab: int = 8, preprocess: str = "none", **extra):
    """The passive party holds three categorical fields whose values drive the label
    (`extra`: spec sections that replace the defaults below). With `preprocess: none` its
    integer codes go through embeddings as they are; with `auto`, a vocabulary of more
    than 14 values (`vocab`) also goes through embeddings, with an unknown bucket."""
    import numpy as np

    rng = np.random.default_rng(5)
    rows = 1200
    codes = rng.integers(0, vocab, size=(rows, 3))
    effects = rng.normal(0, 1.5, size=(3, vocab))
    x = rng.normal(size=(rows, 2))
    logit = effects[np.arange(3), codes].sum(axis=1) + 0.5 * x[:, 0]
    y = (rng.random(rows) < 1 / (1 + np.exp(-logit))).astype(int)
    ids = np.arange(rows)
    np.savetxt(
        tmp_path / "a.csv",
        np.column_stack([ids, y, x]),
        fmt=["%d", "%d", "%.5f", "%.5f"],
        delimiter=",",
        header="id,y,x1,x2",
        comments="",
    )
    np.savetxt(
        tmp_path / "p.csv",
        np.column_stack([ids, codes]),
        fmt="%d",
        delimiter=",",
        header="id,C1,C2,C3",
        comments="",
    )
    datasets = {
        "adv": {"d": TableSource(path=str(tmp_path / "a.csv"), label="y")},
        "pub": {
            "d": TableSource(
                path=str(tmp_path / "p.csv"),
                categorical=("C1", "C2", "C3"),
                preprocess=preprocess,
            )
        },
    }
    spec = parse_spec(
        {
            "job": "cat",
            "protocol": protocol,
            "crypto": TEST_CRYPTO,
            "parties": [
                {"id": "adv", "role": "active", "data": {"dataset": "d"}},
                {"id": "pub", "role": "passive", "data": {"dataset": "d"}},
            ],
            "model": {
                "source": {"out_dim": 2, "embedding_dim": 2, "lr": 5.0},
                "top": {"hidden": [4]},
            },
            "train": {"epochs": 3, "batch_size": 128, "lr": 0.1},
            "validation": {"every": 4},
            **extra,
        }
    )
    return spec, datasets


def test_blindfl_with_categorical_fields_trains(tmp_path) -> None:
    """Embed-MatMul layer for the passive party's categorical fields."""
    spec, datasets = categorical_job(tmp_path, "blindfl")
    result = run_inprocess(spec, datasets)["adv"]
    aucs = [h["auc"] for h in result["history"]]
    assert result["rounds"] == 24 and aucs[-1] >= 0.65 and aucs[-1] > aucs[0] + 0.03, aucs


def default_spec(protocol: str, epochs: int, rounds_per_epoch: int, seed: int = 0) -> object:
    """The default model and training settings (only the keys are small test keys and
    train.seed is `seed`), validated after every epoch."""
    return parse_spec(
        {
            "job": "d",
            "protocol": protocol,
            "crypto": TEST_CRYPTO,
            "parties": [
                {"id": "bank", "role": "active", "data": {"dataset": "d"}},
                {"id": "shop", "role": "passive", "data": {"dataset": "d"}},
            ],
            "train": {"epochs": epochs, "seed": seed},
            "validation": {"every": rounds_per_epoch},
        }
    )


def epoch_aucs(spec, datasets) -> list[float]:
    return [entry["auc"] for entry in run_inprocess(spec, datasets)["bank"]["history"]]


def test_default_blindfl_is_as_accurate_as_split_on_breast(monkeypatch) -> None:
    """With default settings (adagrad), blindfl's validation AUC after 1 and 3 epochs is
    at least split's less 0.005 (docs/protocols.md §4, Backward). Seeded test keys: the
    shares depend on them, so the result is the same every run."""
    pin_keys(monkeypatch, seeded_keys(monkeypatch, ("bank", "shop"), 512, seed=5))
    split = epoch_aucs(default_spec("split", 3, 2), breast())
    blind = epoch_aucs(default_spec("blindfl", 3, 2), breast())
    assert len(blind) == len(split) == 3
    assert all(b >= s - 0.005 for b, s in zip(blind, split, strict=True)), (split, blind)


@pytest.mark.slow  # 65 s: an accuracy guard over a sparse job, no fault of its own
def test_default_blindfl_is_as_accurate_as_split_on_sparse_imbalanced_data(
    tmp_path, monkeypatch
) -> None:
    """300 binary features, ~3% positives (bench/sparse_data.py): plain SGD in the source
    layer lost 0.2 AUC to split here; the preconditioned steps keep blindfl within 0.02 on
    these 8,000 rows (6,400 to train, ~50 positives to validate on; bench/accuracy.py
    measures 20,000). With so few positives one run's AUC moves by +-0.03 with the
    initial weights, for split as for blindfl, so the test compares the means over three
    train.seeds."""
    pin_keys(monkeypatch, seeded_keys(monkeypatch, ("bank", "shop"), 512, seed=5))
    tables = sparse_tables(tmp_path, rows=8000, seed=0)
    datasets = {pid: {"d": table} for pid, table in tables.items()}
    seeds = (0, 1, 2)
    split = np.mean([epoch_aucs(default_spec("split", 2, 25, s), datasets) for s in seeds], 0)
    blind = np.mean([epoch_aucs(default_spec("blindfl", 2, 25, s), datasets) for s in seeds], 0)
    assert len(blind) == len(split) == 2 and split[-1] >= 0.8
    assert all(b >= s - 0.02 for b, s in zip(blind, split, strict=True)), (split, blind)


@pytest.mark.parametrize("protocol", ["split", "blindfl"])
@pytest.mark.parametrize(
    "model",
    [{"source": {"out_dim": 1}, "top": {"hidden": []}}, {}],
    ids=["logistic", "default"],
)
def test_training_starts_from_the_label_prior(tmp_path, monkeypatch, protocol, model) -> None:
    """The output's initial bias is the training labels' log-odds (docs/protocols.md §4,
    Initial output bias): with a learning rate too small to move anything, the mean
    output on ~3% positives sits near log(0.03 / 0.97) = -3.5, not near 0. For blindfl's
    logistic regression (identity top) that bias is the MatMul layer's b."""
    pin_keys(monkeypatch, seeded_keys(monkeypatch, ("bank", "shop"), 512, seed=5))
    tables = sparse_tables(tmp_path, rows=600, seed=0)
    datasets = {pid: {"d": table} for pid, table in tables.items()}
    spec = parse_spec(
        {
            "job": "p",
            "protocol": protocol,
            "crypto": TEST_CRYPTO,
            "parties": [
                {"id": "bank", "role": "active", "data": {"dataset": "d"}},
                {"id": "shop", "role": "passive", "data": {"dataset": "d"}},
            ],
            "model": model,
            "train": {"epochs": 1, "lr": 1e-9},
        }
    )
    outputs = np.asarray(run_inprocess(spec, datasets)["bank"]["validation_outputs"])[:, 0]
    prior = np.log(0.03 / 0.97)
    assert abs(float(outputs.mean()) - prior) < 1.0, (outputs.mean(), prior)
