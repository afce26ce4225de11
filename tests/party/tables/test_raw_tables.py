"""Raw tables through real jobs (parties as threads): amounts in the hundreds of
thousands, words and empty cells train with the smallest spec; the fitted preprocessing
is kept with each model part and applied identically when the model scores new rows."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from vfl.contract.spec import JobSpec, TableSource, parse_spec
from vfl.contract.spec.predict import PredictSpec
from vfl.party.errors import DataError, ModelError
from vfl.party.job import PartyJob
from vfl.party.state import StateDir
from vfl.party.state.model_store import ModelStore
from vfl.party.tables.preprocess.preprocessor import Preprocessor

from tests.support.harness import run_inprocess

CRYPTO = {"key_bits": 512, "allow_insecure_test_keys": True}  # INSECURE test keys
ROWS = 600


def write_raw(folder: Path, rows: int = ROWS, seed: int = 0) -> dict[str, dict[str, TableSource]]:
    """bank: id, y, limit (lognormal), age, status code, education (words); shop: id,
    spend (lognormal), city (words); about 2% empty cells; y depends on both."""
    rng = np.random.default_rng(seed)
    limit = rng.lognormal(11.5, 1.0, rows)
    age = rng.integers(21, 76, rows)
    status = rng.integers(-2, 9, rows)
    edu = rng.choice(["university", "graduate school", "high school", "other"], rows)
    spend = rng.lognormal(9, 1.3, rows)
    city = rng.choice(["paris", "lyon", "nice"], rows)
    logit = (
        1.2 * (np.log(limit) - 11.5)
        - 0.4 * status
        + 1.0 * (np.log(spend) - 9)
        + (edu == "university") * 1.0
        - (city == "nice") * 1.0
    )
    y = (logit + rng.logistic(size=rows) > 0).astype(int)
    empty = rng.random((rows, 3)) < 0.02
    folder.mkdir(parents=True, exist_ok=True)

    def cell(value: object, blank: bool) -> str:
        return "" if blank else (f"{value:.2f}" if isinstance(value, float) else str(value))

    bank = [["id", "y", "limit", "age", "status", "education"]]
    shop = [["id", "spend", "city"]]
    for i in range(rows):
        bank.append([f"c{i}", y[i], cell(float(limit[i]), empty[i, 0]), age[i], status[i], edu[i]])
        shop.append([f"c{i}", cell(float(spend[i]), empty[i, 1]), cell(city[i], empty[i, 2])])
    out = {}
    for party, table, label in (("bank", bank, "y"), ("shop", shop, None)):
        path = folder / f"{party}.csv"
        with path.open("w", newline="") as fh:
            csv.writer(fh).writerows(table)
        out[party] = {"d": TableSource(path=str(path), label=label)}
    return out


def raw_job(protocol: str, **extra) -> JobSpec:
    """The smallest spec (plus test keys), validating on every row so that its last
    validation scores exactly the rows a prediction of the same files scores."""
    return parse_spec(
        {
            "job": "raw",
            "protocol": protocol,
            "crypto": CRYPTO,
            "parties": [
                {"id": "bank", "role": "active", "data": {"dataset": "d", "test_dataset": "d"}},
                {"id": "shop", "role": "passive", "data": {"dataset": "d", "test_dataset": "d"}},
            ],
            **extra,
        }
    )


def predict(spec: JobSpec, states: dict, datasets: dict, out: str = "predict") -> dict:
    ask = PredictSpec(model="job", data={"bank": "d", "shop": "d"}, out=out)
    return run_inprocess(spec.for_prediction(ask), datasets, states=states)


def scores(states: dict, name: str) -> dict[str, float]:
    path = states["bank"].root / "predictions" / f"{name}.csv"
    with path.open() as fh:
        return {row["id"]: float(row["score"]) for row in csv.DictReader(fh)}


@pytest.mark.parametrize(("protocol", "tol"), [("split", 1e-6), ("blindfl", 1e-4)])
def test_a_raw_table_trains_and_new_rows_score_as_the_trained_model_scores_them(
    protocol: str, tol: float, tmp_path: Path
) -> None:
    # Prepare: raw tables (words, empty cells, amounts in the hundreds of thousands)
    datasets = write_raw(tmp_path / "data")
    states = {p: StateDir(tmp_path / p) for p in ("bank", "shop")}
    spec = raw_job(protocol)
    # Execute: train with every default, then score the same rows as new rows
    result = run_inprocess(spec, datasets, states=states)
    got = predict(spec, states, datasets)
    # Assert: a model that learned, and the prediction gives the validation's scores
    bank = result["bank"]
    assert bank["metrics"]["auc"] > 0.75
    expected = 1 / (1 + np.exp(-bank["validation_outputs"][:, 0].astype(np.float64)))
    predicted = scores(states, "predict")
    for row_id, p in zip(bank["validation_ids"], expected, strict=True):
        assert abs(predicted[row_id] - p) <= tol
    for party in ("bank", "shop"):
        _, part = ModelStore(states[party]).load("job", party)
        fitted = Preprocessor.model_validate_json(part["preprocess"])
        assert fitted.mode == "auto" and got[party]["drift"]["unknown_categories"] == 0


def test_unseen_categories_are_scored_through_the_unknown_bucket_and_counted(
    tmp_path: Path,
) -> None:
    datasets = write_raw(tmp_path / "data")
    states = {p: StateDir(tmp_path / p) for p in ("bank", "shop")}
    spec = raw_job("split")
    run_inprocess(spec, datasets, states=states)
    # new rows at the shop: a city never seen, a spend far beyond the training range
    new = tmp_path / "new-shop.csv"
    lines = Path(datasets["shop"]["d"].path).read_text().splitlines()
    lines[1] = "c0,1e9,berlin"
    new.write_text("\n".join(lines) + "\n")
    scoring = {**datasets, "shop": {"d": TableSource(path=str(new))}}
    # Execute
    got = predict(spec, states, scoring, out="drift")
    # Assert: every row scored; the shop counted its drift and keeps the count
    assert got["bank"]["prediction"]["scored"] == ROWS
    assert got["shop"]["drift"] == {
        "out_of_range": 1,
        "unknown_categories": 1,
        "unexpected_missing": 0,
    }
    assert ModelStore(states["shop"]).drift("job")["unknown_categories"] == 1
    assert "c0" in scores(states, "drift")


def test_rows_without_one_of_the_models_columns_are_a_named_error(tmp_path: Path) -> None:
    datasets = write_raw(tmp_path / "data")
    states = {p: StateDir(tmp_path / p) for p in ("bank", "shop")}
    spec = raw_job("split")
    run_inprocess(spec, datasets, states=states)
    short = tmp_path / "short.csv"
    rows = [line.split(",")[:2] for line in Path(datasets["shop"]["d"].path).read_text().split()]
    short.write_text("\n".join(",".join(r) for r in rows) + "\n")
    with pytest.raises(ModelError) as err:
        predict(spec, states, {**datasets, "shop": {"d": TableSource(path=str(short))}})
    assert "lacks the model's column(s) 'city'" in str(err.value)
    assert "party 'shop'" in err.value.public and "city" not in err.value.public


def test_blindfl_with_preprocess_none_fails_at_prepare_naming_the_column(tmp_path: Path) -> None:
    datasets = write_raw(tmp_path / "data")
    numbers = tmp_path / "numbers.csv"
    rows = [line.split(",") for line in Path(datasets["bank"]["d"].path).read_text().split("\n")]
    numbers.write_text(
        "\n".join(",".join(r[:5]) for r in rows if len(r) > 4 and "" not in r[:5]) + "\n"
    )
    bank = {"d": TableSource(path=str(numbers), label="y", preprocess="none")}
    with pytest.raises(DataError) as err:
        PartyJob("j", raw_job("blindfl"), "bank", bank).prepare()  # before any key exists
    assert "column 'limit'" in str(err.value) and "preprocess" in str(err.value)
    PartyJob("j", raw_job("split"), "bank", bank).prepare()  # split holds any number
