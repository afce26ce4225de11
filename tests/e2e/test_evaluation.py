"""The risk team's reading through real daemons: a training job's and a prediction's KS,
Gini and AUC equal scikit-learn's and scipy's on the scores `vfl predict` wrote (1e-9),
with their lift and calibration tables; the population stability of a shifted column is
flagged (and counted in the party's metrics), of an unshifted one not, and a passive
party's columns cross by name only because its config shares them; `vfl report` draws it.
"""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
import yaml
from scipy.stats import ks_2samp

from tests.support.data import FATE, breast_datasets_config
from tests.support.metrics import endpoint, scrape
from tests.support.processes import Daemons

pytestmark = pytest.mark.subprocess
sklearn_metrics = pytest.importorskip("sklearn.metrics", reason="scikit-learn is a test extra")

# split: the final validation and a prediction run the same forward pass, so the job's
# scores of its test rows (here every row) are the ones a prediction writes
JOB = {
    "job": "risk",
    "protocol": "split",
    "parties": [
        {"id": "bank", "role": "active", "data": {"dataset": "breast", "test_dataset": "breast"}},
        {"id": "shop", "role": "passive", "data": {"dataset": "breast", "test_dataset": "breast"}},
    ],
    "model": {"source": {"out_dim": 4}, "top": {"hidden": [8]}},
    "train": {"epochs": 2, "batch_size": 64},
}
SHIFTED = "x3"  # moved by two standard deviations in the shop's `moved` dataset


def moved_table(folder) -> str:
    with (FATE / "breast_hetero_host.csv").open() as fh:
        header, *rows = list(csv.reader(fh))
    j = header.index(SHIFTED)
    for row in rows:
        row[j] = f"{float(row[j]) + 2.0:.6f}"
    path = folder / "moved.csv"
    with path.open("w", newline="") as fh:
        csv.writer(fh).writerows([header, *rows])
    return str(path)


@pytest.fixture(scope="module")
def federation(tmp_path_factory):
    """Daemons (the shop sharing its columns' stability by name, with metrics) and a
    trained split model's job view."""
    workdir = tmp_path_factory.mktemp("risk")
    daemons = Daemons(workdir)
    daemons.start_coordinator()
    datasets = breast_datasets_config()
    datasets["shop"]["moved"] = {"path": moved_table(workdir)}
    shop = {"party": "shop", "coordinator": daemons.address, "datasets": datasets["shop"]}
    (workdir / "shop.yaml").write_text(yaml.safe_dump({**shop, "stability": {"share": "names"}}))
    daemons.start_party("bank", datasets["bank"])
    daemons.start_party("shop", datasets["shop"], flags=("--metrics", "127.0.0.1:0"))
    try:
        with daemons.client() as client:
            job_id = client.submit(yaml.safe_dump(JOB))
        view = daemons.wait(job_id, lambda v: v.state in ("SUCCEEDED", "FAILED"))
        assert view.state == "SUCCEEDED", view.reason
        yield daemons, view
    finally:
        daemons.stop()


def predict(daemons: Daemons, model: str, shop: str) -> dict:
    out = daemons.vfl("predict", model, "--data", "bank=breast", "--data", f"shop={shop}", "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def written(daemons: Daemons, job: str) -> tuple[np.ndarray, np.ndarray]:
    """The labels (from the bank's own file) and the scores `vfl predict` wrote."""
    with (FATE / "breast_hetero_guest.csv").open() as fh:
        labels = {row["id"]: float(row["y"]) for row in csv.DictReader(fh)}
    with (daemons.workdir / "bank-state" / "predictions" / f"{job}.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    return np.array([labels[r["id"]] for r in rows]), np.array([float(r["score"]) for r in rows])


def test_ks_gini_and_auc_of_the_job_and_the_prediction_equal_scipy_and_sklearn(federation):
    daemons, trained = federation
    # Execute
    result = predict(daemons, trained.job_id, "breast")
    # Assert: the figures of the scores written, computed by scipy and scikit-learn
    labels, scores = written(daemons, result["job"])
    auc = sklearn_metrics.roc_auc_score(labels, scores)
    ks = ks_2samp(scores[labels == 1], scores[labels == 0]).statistic
    job = trained.to_plain()
    for name, got in (("job", job), ("prediction", result)):
        ev = got["evaluation"]
        assert ev["rows"] == 569 and ev["events"] == labels.sum(), name
        assert abs(ev["ks"] - ks) <= 1e-9 and abs(got["metrics"]["ks"] - ks) <= 1e-9, name
        assert abs(ev["gini"] - (2 * auc - 1)) <= 1e-9, name
        assert abs(got["metrics"]["gini"] - (2 * auc - 1)) <= 1e-9, name
        assert abs(ev["auc"] - auc) <= 1e-9, name
    assert result["evaluation"] == job["evaluation"]
    lift = result["evaluation"]["lift"]
    assert sum(b["rows"] for b in lift) == 569 and lift[-1]["cumulative_events_share"] == 1.0
    assert lift[0]["lift"] > 1.0 > lift[-1]["lift"]  # a model that ranks
    bins = result["evaluation"]["calibration"]
    assert [b["rows"] for b in bins] == [b["rows"] for b in lift]
    # the rows it trained on: nothing moved, the bank's columns by count only
    bank, shop = result["parties"]["bank"]["stability"], result["parties"]["shop"]["stability"]
    assert (bank["columns"], bank["watch"], bank["shift"], bank["shared"]) == (10, 0, 0, [])
    assert bank["scores"]["index"] == 0.0 and bank["scores"]["level"] == "stable"
    assert shop["columns"] == 20 and {c["level"] for c in shop["shared"]} == {"stable"}


def test_a_shifted_column_is_flagged_by_its_party_and_counted_in_its_metrics(federation):
    daemons, trained = federation
    # Execute
    result = predict(daemons, trained.job_id, "moved")
    # Assert: the shop's shifted column, by the name its config shares; no other column
    shop = result["parties"]["shop"]["stability"]
    levels = {c["column"]: c["level"] for c in shop["shared"]}
    assert levels.pop(SHIFTED) == "shift" and set(levels.values()) == {"stable"}
    assert (shop["shift"], shop["watch"]) == (1, 0)
    bank = result["parties"]["bank"]["stability"]
    assert (bank["shift"], bank["watch"], bank["shared"]) == (0, 0, [])
    shown = daemons.vfl("status", result["job"])
    assert "shop: stability of 20 columns: 0 at watch (0.1+), 1 shifted" in shown.stdout
    assert f"{SHIFTED} " in shown.stdout and "evaluation over 569 rows" in shown.stdout
    samples = scrape(endpoint(daemons.workdir, "shop"))
    key = (("level", "shift"), ("model", trained.job_id), ("what", "columns"))
    assert samples[("vfl_party_unstable_total", key)] == 1.0
    kept = daemons.workdir / "shop-state" / "models" / trained.job_id / "stability.json"
    assert json.loads(kept.read_text())["job"] == result["job"]
    # the report draws it
    out = daemons.vfl("report", result["job"], "--out", str(daemons.workdir / "report"))
    assert out.returncode == 0, out.stderr
    page = (daemons.workdir / "report" / "report.html").read_text()
    assert "Lift and gains" in page and "Calibration" in page and "Population stability" in page
    for picture in ("gains.png", "lift_by_band.png", "calibration.png"):
        assert (daemons.workdir / "report" / picture).stat().st_size > 1000
