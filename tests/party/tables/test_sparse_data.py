"""Sparse (LIBSVM) data stays CSR from the file to the layer: a table of 1e6 hashed
columns loads in memory proportional to its nonzeros, and `split` and `blindfl` train on
it end to end (parties as threads, small INSECURE test keys).

The tables are generated here: each row holds hashed tokens, buckets in [0, 1e6); the
label is planted on a few buckets, so a model that never sees the passive party's sparse
columns scores at chance and the AUC checks fail.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from vfl.contract.spec import JobSpec, TableSource, parse_spec
from vfl.contract.spec.predict import PredictSpec
from vfl.party.state import StateDir
from vfl.party.state.model_store import ModelStore
from vfl.party.tables.load import load_table
from vfl.party.training.inputs import Inputs
from vfl.party.training.nets import mlp_forward, seeded_bottom, seeded_mlp

from tests.support.blindfl_keys import pin_keys, seeded_keys
from tests.support.harness import run_inprocess

CRYPTO = {"key_bits": 512, "allow_insecure_test_keys": True}  # INSECURE test keys
WIDTH = 1_000_000  # hashed buckets


def hashed_tables(folder: Path, name: str, rows: int, vocab: int, rare: int, seed: int):
    """A passive party's LIBSVM file of hashed tokens (`per row`: 12 from a vocabulary of
    `vocab` buckets, `rare` more drawn from all 1e6) and the active party's file with the
    label and one noise column. The label is 1 when a row holds one of 5 signal buckets,
    flipped for 10% of rows."""
    rng = np.random.default_rng(seed)
    buckets = np.sort(rng.choice(WIDTH, size=vocab, replace=False))  # the same per seed
    signal = set(buckets[:5].tolist())
    data = np.random.default_rng([seed, len(name)])
    shop, bank = [], []
    for r in range(rows):
        tokens = set(data.choice(buckets, size=12).tolist())
        tokens |= set(data.integers(0, WIDTH, size=rare).tolist())
        if r == 0:
            tokens.add(WIDTH - 1)  # the file is 1e6 columns wide
        y = int(bool(tokens & signal)) ^ int(data.random() < 0.1)
        shop.append(f"@{name}{r} " + " ".join(f"{t}:1" for t in sorted(tokens)))
        bank.append(f"@{name}{r} {y} 1:{data.normal():.4f}")
    (folder / f"{name}.shop").write_text("\n".join(shop) + "\n")
    (folder / f"{name}.bank").write_text("\n".join(bank) + "\n")
    return {
        "bank": TableSource(path=str(folder / f"{name}.bank"), format="libsvm", label="y"),
        "shop": TableSource(path=str(folder / f"{name}.shop"), format="libsvm"),
    }


def datasets(folder: Path, vocab: int, rare: int) -> dict[str, dict[str, TableSource]]:
    train = hashed_tables(folder, "tr", 2000, vocab, rare, seed=5)
    test = hashed_tables(folder, "te", 600, vocab, rare, seed=5)
    return {p: {"d": train[p], "t": test[p]} for p in ("bank", "shop")}


def job(protocol: str, **train) -> JobSpec:
    return parse_spec(
        {
            "job": "hashed",
            "protocol": protocol,
            "crypto": CRYPTO,
            "parties": [
                {"id": "bank", "role": "active", "data": {"dataset": "d", "test_dataset": "t"}},
                {"id": "shop", "role": "passive", "data": {"dataset": "d", "test_dataset": "t"}},
            ],
            "model": {"source": {"out_dim": 2}, "top": {"hidden": []}},
            "train": {"epochs": 3, "batch_size": 128, "lr": 0.05, "seed": 2, **train},
            "validation": {"every": 1000},
        }
    )


def test_the_sparse_bottom_model_matches_the_dense_one_with_its_gradients() -> None:
    # Prepare: the same rows as CSR and dense, one categorical field, a hidden layer
    x = sp.random(16, 50, density=0.1, format="csr", dtype=np.float32, random_state=1)
    cat = np.random.default_rng(1).integers(0, 4, size=(16, 1))
    sparse_in, dense_in = Inputs(x, cat, (4,)), Inputs(x.toarray(), cat, (4,))
    nets = [seeded_bottom(3, "p", i, 2, (5,), 3) for i in (sparse_in, dense_in)]
    rows = np.array([3, 0, 7, 7, 15])
    # Execute
    outs = [net(i.take(rows)) for net, i in zip(nets, (sparse_in, dense_in), strict=True)]
    for out in outs:
        (out**2).sum().backward()
    # Assert: the same outputs and the same gradients on every weight
    assert sp.issparse(sparse_in.take(rows)[0])
    torch.testing.assert_close(outs[0], outs[1])
    for a, b in zip(nets[0].parameters(), nets[1].parameters(), strict=True):
        assert a.grad is not None and a.grad.abs().sum() > 0
        torch.testing.assert_close(a.grad, b.grad)
    own = seeded_mlp(3, "b", 50, (), 2)
    torch.testing.assert_close(
        mlp_forward(own, sparse_in.take(rows)[0]), own(dense_in.take(rows)[0])
    )


def test_a_table_of_1e6_hashed_columns_loads_in_memory_proportional_to_its_nonzeros(
    tmp_path,
) -> None:
    # Prepare: 2,000 rows of ~20 tokens, 8 of them rare buckets anywhere in 1e6
    source = hashed_tables(tmp_path, "tr", 2000, 300, 8, seed=5)["shop"]
    # Execute
    tracemalloc.start()
    try:
        table = load_table(source, "hashed")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Assert: CSR, only the columns that occur, named by their index in the file
    x = table.features
    assert sp.isspmatrix_csr(x) and x.shape[0] == 2000 and 30_000 < x.nnz < 45_000
    assert x.shape[1] < 20_000 and table.feature_names[-1] == f"f{WIDTH - 1}"
    stored = x.data.nbytes + x.indices.nbytes + x.indptr.nbytes
    assert stored <= 16 * x.nnz + 8 * (x.shape[0] + 1)
    dense_bytes = 2000 * WIDTH * 4  # 8 GB
    assert peak < 400 * x.nnz + 2_000_000, f"peak {peak} B for {x.nnz} nonzeros"
    assert peak < dense_bytes / 500


def test_split_trains_and_predicts_on_1e6_hashed_columns(tmp_path) -> None:
    # Prepare: rare buckets too (about 16,000 distinct columns), a separate test table
    data = datasets(tmp_path, vocab=300, rare=8)
    states = {p: StateDir(tmp_path / p) for p in ("bank", "shop")}
    spec = job("split", optimizer="adam")
    # Execute
    result = run_inprocess(spec, data, states=states)
    ask = PredictSpec(model="job", data={"bank": "t", "shop": "t"})
    predicted = run_inprocess(spec.for_prediction(ask), data, states=states)
    # Assert: the planted signal is learnt through the sparse bottom model
    auc = result["bank"]["metrics"]["auc"]
    assert auc >= 0.85, auc
    manifest, _ = ModelStore(states["shop"]).load("job", "shop")
    assert len(manifest.columns) < 20_000 and manifest.columns[-1].name == f"f{WIDTH - 1}"
    # the test table's columns never trained on are dropped, as in validation
    assert predicted["bank"]["metrics"]["auc"] == pytest.approx(auc, abs=1e-6)


def test_blindfl_trains_on_1e6_hashed_columns_as_well_as_split(tmp_path, monkeypatch) -> None:
    # Prepare: 300 hashed buckets in use out of 1e6 (the layer's weights: one per bucket);
    # seeded test keys (the shares depend on them: the same result every run)
    data = datasets(tmp_path, vocab=300, rare=0)
    pin_keys(monkeypatch, seeded_keys(monkeypatch, ("bank", "shop"), CRYPTO["key_bits"], 3))
    # Execute: the default optimiser in both
    split = run_inprocess(job("split"), data)["bank"]["metrics"]["auc"]
    blind = run_inprocess(job("blindfl"), data)["bank"]["metrics"]["auc"]
    # Assert
    assert blind >= 0.85 and split >= 0.85, (blind, split)
    assert abs(blind - split) <= 0.02
