"""`vfl models` over real processes: a trained split job is a model both parties hold;
deleting it while a party is down leaves that party listed as still holding its part,
until it comes back and registers; a deleted model cannot score."""

from __future__ import annotations

import json
import time

import pytest
from vfl.party.state import StateDir
from vfl.party.state.model_store import ModelStore

from tests.support.data import breast_datasets_config
from tests.support.jobs import job
from tests.support.processes import Daemons

pytestmark = pytest.mark.subprocess

DATASETS = breast_datasets_config()


def held(workdir, party: str) -> list[str]:
    """The models whose part `party` keeps in its state directory."""
    return [m.model_id for m in ModelStore(StateDir(workdir / f"{party}-state")).list()]


def models_json(daemons: Daemons, *args: str) -> tuple[int, object, str]:
    out = daemons.vfl("models", *args, "--json")
    return out.returncode, json.loads(out.stdout) if out.stdout else None, out.stderr


def test_list_show_and_a_delete_a_party_missed_until_it_registers_again(tmp_path) -> None:
    # Prepare: a two-epoch split job on the breast tables
    daemons = Daemons(tmp_path)
    daemons.start_coordinator()
    for party, datasets in DATASETS.items():
        daemons.start_party(party, datasets)
    try:
        with daemons.client() as client:
            model_id = client.submit(job(name="kept", epochs=2))
        view = daemons.wait(model_id, lambda v: v.state in ("SUCCEEDED", "FAILED"))
        assert view.state == "SUCCEEDED", view.reason
        # Execute + Assert: listed, both parties hold a part, with its AUC
        code, listed, _ = models_json(daemons)
        assert code == 0 and [m["model_id"] for m in listed] == [model_id]
        (model,) = listed
        assert model["state"] == "available" and model["holders"] == ["bank", "shop"]
        assert model["metrics"]["auc"] == pytest.approx(view.result.metrics["auc"])
        assert model["metrics"]["auc"] > 0.9
        table = daemons.vfl("models").stdout
        assert "MODEL" in table and "PARTIES" in table
        line = next(row for row in table.splitlines() if row.startswith(model_id))
        assert "available" in line and "auc=" in line and "bank, shop" in line
        shown = daemons.vfl("models", "show", model_id)
        assert shown.returncode == 0 and f"model {model_id}: available" in shown.stdout
        assert "bank: holds its part (active" in shown.stdout
        assert "shop: holds its part (passive" in shown.stdout
        # Execute: the shop is down when the model is deleted
        daemons.kill("shop")
        code, deleting, stderr = models_json(daemons, "delete", model_id)
        # Assert: deleting; the shop still holds its part; the model cannot score
        assert code == 3 and deleting["state"] == "deleting", stderr
        assert deleting["holders"] == deleting["unreachable"] == ["shop"]
        assert "party 'shop' still holds a part" in stderr
        assert held(tmp_path, "bank") == [] and held(tmp_path, "shop") == [model_id]
        line = next(r for r in daemons.vfl("models").stdout.splitlines() if model_id in r)
        assert "deleting" in line and "shop (unreachable)" in line
        predicted = daemons.vfl(
            "predict", model_id, "--data", "bank=breast", "--data", "shop=breast"
        )
        assert predicted.returncode == 2
        assert f"model {model_id} was deleted on" in predicted.stderr
        assert "train it again" in predicted.stderr
        # Execute: the shop comes back and registers
        daemons.start_party("shop", DATASETS["shop"])
        # Assert: it dropped its part; the model is no longer listed, `show` says deleted
        deadline = time.monotonic() + 30
        while held(tmp_path, "shop") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert held(tmp_path, "shop") == [], daemons.logs()
        assert models_json(daemons)[1] == []
        code, gone, _ = models_json(daemons, "show", model_id)
        assert code == 0 and gone["state"] == "deleted" and gone["holders"] == []
        again = daemons.vfl("models", "delete", model_id)
        assert again.returncode == 0 and f"model {model_id}: deleted" in again.stdout
        unknown = daemons.vfl("models", "show", "no-such-model")
        assert unknown.returncode == 2
        assert "no model no-such-model; list them with `vfl models`" in unknown.stderr
    finally:
        daemons.stop()
