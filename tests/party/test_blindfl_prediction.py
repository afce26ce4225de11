"""A blindfl batch prediction over the in-process channel (small TEST keys): the active
party pipelines batches (the next batch's m1 goes out before this batch's m2 is
decrypted), and the scores do not depend on the batch size, also when a passive party
runs both source layers."""

from __future__ import annotations

import csv
import time
from pathlib import Path

import numpy as np
import vfl.party.training.blindfl.active as active
from vfl.contract.spec import TableSource
from vfl.contract.spec.predict import PredictSpec
from vfl.party.config import PartyConfig
from vfl.party.daemon import PartyDaemon
from vfl.party.state import StateDir
from vfl.party.state.model_store import ModelStore
from vfl.rpc import PeerClients
from vfl.secure.executor import ComputeConfig
from vfl.secure.source_layers.state import tables_from_state

from tests.party.test_blindfl_training import breast_spec
from tests.support.data import breast
from tests.support.harness import run_inprocess
from tests.support.numeric import assert_close


def _scores(path: Path) -> dict[str, float]:
    with path.open() as fh:
        return {row["id"]: float(row["score"]) for row in csv.DictReader(fh)}


def test_pipelined_batches_score_as_one_batch(tmp_path: Path) -> None:
    # Prepare: a trained model at both parties
    datasets: dict[str, dict[str, TableSource]] = breast()
    spec = breast_spec("blindfl", train={"epochs": 2, "batch_size": 64, "seed": 3})
    states = {p: StateDir(tmp_path / p) for p in datasets}
    run_inprocess(spec, datasets, states=states)
    # Execute: score every row in batches of 64 (9 batches, pipelined) and in one batch
    results, bank_events = {}, []

    def record(direction, sender, receiver, tag, data) -> None:
        if "bank" in (sender, receiver) and tag.startswith("predict/"):
            bank_events.append((direction, tag))

    for batch in (64, 1024):
        request = PredictSpec(
            model="job", data={"bank": "d", "shop": "d"}, out=f"b{batch}", batch_size=batch
        )
        hook = record if batch == 64 else None
        results[batch] = run_inprocess(spec.for_prediction(request), datasets, hook, states)
    # Assert: B sent the m1 of batch b + 1 before it took the m2 of batch b
    for b in range(1, 9):
        sent = bank_events.index(("sent", f"predict/b{b + 1}/m1"))
        assert sent < bank_events.index(("received", f"predict/b{b}/m2"))
    assert results[64]["bank"]["rounds"] == 9 and results[1024]["bank"]["rounds"] == 1
    assert results[64]["bank"]["metrics"]["auc"] >= 0.95
    folder = tmp_path / "bank" / "predictions"
    small, whole = _scores(folder / "b64.csv"), _scores(folder / "b1024.csv")
    assert len(small) == 569 and small.keys() == whole.keys()
    ids = sorted(small)
    assert_close([small[i] for i in ids], [whole[i] for i in ids], 1e-5)


def test_a_model_kept_with_a_narrower_side_bottom_still_scores(tmp_path: Path, monkeypatch):
    """B's own bottom beside Z became 2h wide (`side_width`); a model part kept before,
    with an h-wide bottom, loads with the width it was trained with and scores as well."""
    # Prepare: a model trained with the earlier width (h = out_dim = 4 in breast_spec)
    monkeypatch.setattr(active, "side_width", lambda out_dim, parties: out_dim)
    datasets = breast()
    spec = breast_spec("blindfl", train={"epochs": 2, "batch_size": 64, "seed": 3})
    states = {p: StateDir(tmp_path / p) for p in datasets}
    trained = run_inprocess(spec, datasets, states=states)["bank"]["metrics"]["auc"]
    monkeypatch.undo()
    assert active.side_width(4, 2) == 8
    # Execute
    request = PredictSpec(model="job", data={"bank": "d", "shop": "d"}, out="old")
    scored = run_inprocess(spec.for_prediction(request), datasets, None, states)
    # Assert: scored with the kept model (the validation rows are among the scored ones)
    assert scored["bank"]["metrics"]["auc"] >= min(trained, 0.95)
    assert len(_scores(tmp_path / "bank" / "predictions" / "old.csv")) == 569


def test_pipelined_batches_with_dense_and_categorical_columns(tmp_path: Path) -> None:
    # Prepare: the passive party has both layers (MatMul and Embed-MatMul) to interleave
    rng = np.random.default_rng(9)
    rows = 300
    codes, x = rng.integers(0, 5, size=(rows, 2)), rng.normal(size=(rows, 3))
    y = (codes.sum(axis=1) + x[:, 0] + rng.normal(size=rows) > 4).astype(int)
    ids = np.arange(rows)
    _csv(tmp_path / "a.csv", "id,y,a1", [ids, y], x[:, :1])
    _csv(tmp_path / "p.csv", "id,C1,C2,b1,b2", [ids, *codes.T], x[:, 1:])
    datasets = {
        "bank": {"d": TableSource(path=str(tmp_path / "a.csv"), label="y")},
        "shop": {"d": TableSource(path=str(tmp_path / "p.csv"), categorical=("C1", "C2"))},
    }
    spec = breast_spec(
        "blindfl",
        model={"source": {"out_dim": 3, "embedding_dim": 2}, "top": {"hidden": [4]}},
        train={"epochs": 1, "batch_size": 100, "seed": 3},
    )
    states = {p: StateDir(tmp_path / p) for p in datasets}
    run_inprocess(spec, datasets, states=states)
    # Execute
    for batch in (64, 1024):
        request = PredictSpec(
            model="job", data={"bank": "d", "shop": "d"}, out=f"b{batch}", batch_size=batch
        )
        run_inprocess(spec.for_prediction(request), datasets, states=states)
    # Assert
    folder = tmp_path / "bank" / "predictions"
    small, whole = _scores(folder / "b64.csv"), _scores(folder / "b1024.csv")
    ids = sorted(whole)
    assert len(ids) == rows and sorted(small) == ids
    assert_close([small[i] for i in ids], [whole[i] for i in ids], 1e-5)


def _csv(path: Path, header: str, ints: list[np.ndarray], reals: np.ndarray) -> None:
    values, fmt = np.column_stack([*ints, reals]), ["%d"] * len(ints) + ["%.5f"] * reals.shape[1]
    np.savetxt(path, values, fmt=fmt, delimiter=",", header=header, comments="")


def test_a_restarted_daemon_keeps_and_fills_the_pools_of_its_models_peer_keys(tmp_path: Path):
    # Prepare: a trained model at both parties, and its peer key as the bank saved it
    datasets: dict[str, dict[str, TableSource]] = breast()
    spec = breast_spec("blindfl", train={"epochs": 1, "batch_size": 128, "seed": 3})
    states = {p: StateDir(tmp_path / p) for p in datasets}
    run_inprocess(spec, datasets, states=states)
    _, part = ModelStore(states["bank"]).load("job", "bank")
    saved = tables_from_state(part["src"]["obfuscators"])["shop"]
    # Execute: the bank's daemon starts again on its state directory and idles
    compute = ComputeConfig(kept_obfuscators=64)
    config = PartyConfig("bank", state_dir=tmp_path / "bank", compute=compute)
    daemon = PartyDaemon(config, PeerClients(), None)
    try:
        deadline = time.monotonic() + 60
        while daemon.executor.pools.ready_counts().get("shop", 0) < 64:
            assert time.monotonic() < deadline, daemon.executor.pools.ready_counts()
            time.sleep(0.1)
        # Assert: the kept pool serves the saved key with the saved table's bases
        pool = daemon.executor.pools.pool(saved.key, lambda gate: None)  # kept: not made again
        assert pool.bases == saved.bases
    finally:
        daemon.close()
