"""Batch prediction with stored models, parties as threads of one process: every party
keeps its part of a trained model; a prediction job scores rows with the protocol the
model was trained with and gives the scores and metrics of the job's own validation."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from vfl.contract.spec import JobSpec, TableSource, parse_spec
from vfl.contract.spec.predict import PredictSpec
from vfl.party.datasets import Dataset
from vfl.party.errors import LimitExceeded, ModelError
from vfl.party.guard import JobBudget
from vfl.party.inference.batch import PredictJob
from vfl.party.inference.model import LoadedModel
from vfl.party.limits import JobEstimate
from vfl.party.state import StateDir
from vfl.party.state.model_store import ModelStore

from tests.party.test_blindfl_training import categorical_job
from tests.support.data import FATE, breast
from tests.support.harness import run_inprocess

CRYPTO = {"key_bits": 512, "allow_insecure_test_keys": True}  # INSECURE test keys


def breast_job(protocol: str, **extra) -> JobSpec:
    """A breast job that validates on every row (test rows = the training rows), so its
    last validation scores exactly the rows a prediction of the same files scores."""
    return parse_spec(
        {
            "job": "pred",
            "protocol": protocol,
            "crypto": CRYPTO,
            "parties": [
                {"id": "bank", "role": "active", "data": {"dataset": "d", "test_dataset": "d"}},
                {"id": "shop", "role": "passive", "data": {"dataset": "d", "test_dataset": "d"}},
            ],
            "model": {"source": {"out_dim": 4}, "top": {"hidden": [8]}},
            "train": {"epochs": 2, "batch_size": 64},
            **extra,
        }
    )


def trained(protocol: str, tmp_path: Path, **extra) -> tuple[JobSpec, dict, dict]:
    spec = breast_job(protocol, **extra)
    states = {p: StateDir(tmp_path / p) for p in ("bank", "shop")}
    return spec, states, run_inprocess(spec, breast(), states=states)


def predict(spec: JobSpec, states: dict, datasets=None, **request) -> dict:
    ask = PredictSpec(model="job", data={"bank": "d", "shop": "d"}, **request)
    return run_inprocess(spec.for_prediction(ask), datasets or breast(), states=states)


def scores(states: dict, name: str = "predict") -> dict[str, dict[str, str]]:
    path = states["bank"].root / "predictions" / f"{name}.csv"
    with path.open() as fh:
        return {row["id"]: row for row in csv.DictReader(fh)}


@pytest.mark.parametrize("protocol", ["split", "blindfl"])
def test_a_prediction_gives_the_scores_and_metrics_of_the_jobs_own_validation(protocol, tmp_path):
    # Prepare: a trained model, kept at both parties
    spec, states, result = trained(protocol, tmp_path)
    bank = result["bank"]
    # Execute
    got = predict(spec, states)
    # Assert: same metrics, and per id the validation's score within fixed-point error
    for metric, value in bank["metrics"].items():
        assert got["bank"]["metrics"][metric] == pytest.approx(value, abs=1e-4), metric
    expected = 1 / (1 + np.exp(-bank["validation_outputs"][:, 0]))
    rows = scores(states)
    assert len(rows) == 569 == len(bank["validation_ids"])
    for row_id, p in zip(bank["validation_ids"], expected, strict=True):
        assert float(rows[row_id]["score"]) == pytest.approx(p, abs=1e-4)
        assert rows[row_id]["class"] == ("1" if p >= 0.5 else "0")
    assert got["bank"]["prediction"] == {
        "model": "job",
        "rows": 569,
        "scored": 569,
        "missing": 0,
        "output": "predict.csv",
    }
    assert "prediction" not in got["shop"] and "metrics" not in got["shop"]


def test_every_party_keeps_its_own_part_with_a_manifest(tmp_path):
    spec, states, result = trained("blindfl", tmp_path)
    bank = ModelStore(states["bank"]).manifest("job", "bank")
    shop = ModelStore(states["shop"]).manifest("job", "shop")
    assert (bank.role, shop.role) == ("active", "passive")
    assert bank.protocol == shop.protocol == "blindfl"
    assert bank.task is not None and shop.task is None
    assert bank.metrics == result["bank"]["metrics"] and not shop.metrics
    assert shop.dense_columns == tuple(f"x{i}" for i in range(20))
    assert bank.key_fingerprint and shop.key_fingerprint != bank.key_fingerprint
    assert bank.spec_hash == spec.spec_hash()
    for party in ("bank", "shop"):
        folder = states[party].root / "models" / "job"
        assert folder.stat().st_mode & 0o777 == 0o700
        assert {p.name for p in folder.iterdir()} == {"manifest.json", "part.ckpt"}
        assert all(p.stat().st_mode & 0o777 == 0o600 for p in folder.iterdir())
        manifest = json.loads((folder / "manifest.json").read_text())
        assert "keypair" not in json.dumps(manifest)  # the manifest holds no key material


def shuffled_subsets(tmp_path: Path) -> dict[str, dict[str, TableSource]]:
    """bank: every row shuffled plus 5 ids only it holds; shop: 400 rows shuffled plus 3
    ids only it holds."""
    rng = np.random.default_rng(7)
    tmp_path.mkdir()
    out = {}
    for party, name, keep, extra, label in (
        ("bank", "breast_hetero_guest.csv", 569, 5, "y"),
        ("shop", "breast_hetero_host.csv", 400, 3, None),
    ):
        with (FATE / name).open() as fh:
            header, *rows = list(csv.reader(fh))
        rows = [rows[i] for i in rng.permutation(len(rows))[:keep]]
        rows += [[f"{party}-only-{i}", *row[1:]] for i, row in enumerate(rows[:extra])]
        rows = [rows[i] for i in rng.permutation(len(rows))]
        path = tmp_path / f"{party}.csv"
        with path.open("w", newline="") as fh:
            csv.writer(fh).writerows([header, *rows])
        out[party] = {"d": TableSource(path=str(path), label=label)}
    return out


def test_only_the_intersection_of_shuffled_subsets_is_scored_and_counted(tmp_path):
    spec, states, _ = trained("split", tmp_path)
    data = shuffled_subsets(tmp_path / "data")
    got = predict(spec, states, data, out="subset")
    assert got["bank"]["prediction"] == {
        "model": "job",
        "rows": 574,
        "scored": 400,
        "missing": 174,
        "output": "subset.csv",
    }
    rows = scores(states, "subset")
    with open(data["shop"]["d"].path) as fh:
        shop_ids = {r["id"] for r in csv.DictReader(fh)}
    assert set(rows) <= shop_ids and len(rows) == 400
    assert not [i for i in rows if "only" in i]
    # scores are in the active party's own row order
    with open(data["bank"]["d"].path) as fh:
        bank_order = [r["id"] for r in csv.DictReader(fh) if r["id"] in rows]
    assert list(rows) == bank_order
    # the same rows score the same as in the full prediction
    predict(spec, states)
    full = scores(states)
    for row_id, row in rows.items():
        assert float(row["score"]) == pytest.approx(float(full[row_id]["score"]), abs=1e-6)


def test_columns_that_do_not_match_the_model_are_a_named_error(tmp_path):
    spec, states, _ = trained("split", tmp_path)
    with (FATE / "breast_hetero_host.csv").open() as fh:
        header, *rows = list(csv.reader(fh))
    renamed = [header[0], "x0_new", *header[2:]]
    path = tmp_path / "renamed.csv"
    with path.open("w", newline="") as fh:
        csv.writer(fh).writerows([renamed, *rows])
    data = {**breast(), "shop": {"d": TableSource(path=str(path))}}
    with pytest.raises(ModelError) as err:
        predict(spec, states, data)
    text = str(err.value)
    assert "does not fit model job" in text and "lacks the model's column(s) 'x0'" in text
    assert "not trained on 'x0_new'" in text
    assert "x0" not in err.value.public and str(path) not in err.value.public
    # the same columns in another order are the same columns: matched by name
    swapped = [header[0], header[2], header[1], *header[3:]]
    with path.open("w", newline="") as fh:
        csv.writer(fh).writerows([swapped, *[[r[0], r[2], r[1], *r[3:]] for r in rows]])
    assert predict(spec, states, data)["bank"]["prediction"]["scored"] == 569


def test_a_model_a_party_no_longer_holds_is_a_named_error(tmp_path):
    spec, states, _ = trained("split", tmp_path)
    assert ModelStore(states["shop"]).delete("job")
    with pytest.raises(ModelError, match="party 'shop' holds no part of model job"):
        predict(spec, states)


def test_a_corrupt_part_is_refused(tmp_path):
    spec, states, _ = trained("split", tmp_path)
    part = states["bank"].root / "models" / "job" / "part.ckpt"
    data = bytearray(part.read_bytes())
    data[-10] ^= 0xFF
    part.write_bytes(bytes(data))
    with pytest.raises(ModelError, match="corrupt"):
        predict(spec, states)


def test_a_stored_split_model_scores_as_its_plaintext_forward(tmp_path):
    """The stored parts are the trained models: the top model on the concatenated bottom
    outputs, computed here in plaintext, gives the scores the prediction wrote."""
    spec, states, _ = trained("split", tmp_path)
    predict(spec, states)
    _, bank = ModelStore(states["bank"]).load("job", "bank")
    _, shop = ModelStore(states["shop"]).load("job", "shop")
    x = {}  # each party's model inputs: its rows preprocessed as its part says
    for party in ("bank", "shop"):
        model = LoadedModel.open(states[party], "job", party)
        table, inputs, _ = model.read(Dataset("d", breast()[party]["d"]))
        x[party] = dict(zip(table.ids, inputs.x.astype(np.float64).tolist(), strict=True))
    got = scores(states)
    row_id = next(iter(got))

    def linear(state, prefix, v):
        return v @ state[f"{prefix}.weight"].double().T + state[f"{prefix}.bias"].double()

    xb = torch.tensor([x["bank"][row_id]], dtype=torch.float64)
    xs = torch.tensor([x["shop"][row_id]], dtype=torch.float64)
    h = torch.cat([linear(bank["bottom"], "mlp.0", xb), linear(shop["bottom"], "mlp.0", xs)], 1)
    out = linear(bank["top"], "2", torch.relu(linear(bank["top"], "0", h)))
    assert float(got[row_id]["score"]) == pytest.approx(float(torch.sigmoid(out)), abs=1e-5)


def test_categorical_fields_score_through_the_embed_layer_and_unseen_codes_are_counted(
    tmp_path,
):
    # Prepare: the passive party's categorical fields go through the Embed-MatMul layer
    spec, datasets = categorical_job(
        tmp_path, "blindfl", vocab=20, preprocess="auto", train={"epochs": 1, "batch_size": 128}
    )
    states = {p: StateDir(tmp_path / p) for p in ("adv", "pub")}
    adv = run_inprocess(spec, datasets, states=states)["adv"]
    ask = PredictSpec(model="job", data={"adv": "d", "pub": "d"})
    # Execute
    got = run_inprocess(spec.for_prediction(ask), datasets, states=states)["adv"]
    # Assert: the validation rows score as in the job's last validation
    with (states["adv"].root / "predictions" / "predict.csv").open() as fh:
        rows = {row["id"]: float(row["score"]) for row in csv.DictReader(fh)}
    assert got["prediction"]["scored"] == 1200
    expected = 1 / (1 + np.exp(-adv["validation_outputs"][:, 0]))
    for row_id, p in zip(adv["validation_ids"], expected, strict=True):
        assert rows[row_id] == pytest.approx(p, abs=1e-4)
    # a code the model never saw: scored through the unknown bucket, and counted
    text = (tmp_path / "p.csv").read_text().splitlines()
    text[5] = text[5].rsplit(",", 1)[0] + ",20"
    (tmp_path / "p.csv").write_text("\n".join(text) + "\n")
    again = PredictSpec(model="job", data={"adv": "d", "pub": "d"}, out="again")
    got = run_inprocess(spec.for_prediction(again), datasets, states=states)
    assert got["adv"]["prediction"]["scored"] == 1200
    assert got["pub"]["drift"]["unknown_categories"] == 1


def test_a_prediction_reading_more_rows_than_max_rows_fails_as_it_reads(tmp_path):
    # Prepare: a model, and a prediction job at shop whose guard allows 100 rows
    spec, states, _ = trained("split", tmp_path)
    ask = PredictSpec(model="job", data={"bank": "d", "shop": "d"})
    job = PredictJob("p", spec.for_prediction(ask), "shop", breast()["shop"], states["shop"], None)
    job.check = JobBudget("p", JobEstimate(100, 10, 1, 1), max_rows=100).check
    # Execute, Assert: its 569 rows fail it in the estimate's words
    with pytest.raises(LimitExceeded, match=r"hold at least 569 rows here, .* max_rows = 100"):
        job.prepare()
