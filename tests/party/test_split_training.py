"""Split learning over the in-process channel: accuracy per task, determinism, bad ids."""

from __future__ import annotations

import pytest
from vfl.contract.spec import TableSource, parse_spec
from vfl.party.errors import DataError

from tests.support.data import FATE, breast, motor, shared_data
from tests.support.harness import run_inprocess


def spec_for(parties: list[tuple[str, str]], task: str, **train) -> object:
    return parse_spec(
        {
            "job": "t",
            "parties": [
                {"id": pid, "role": role, "data": {"dataset": "d"}} for pid, role in parties
            ],
            "model": {"source": {"out_dim": 8}, "top": {"hidden": [16], "task": task}},
            "train": {"epochs": 5, "batch_size": 64, **train},
            "validation": {"fraction": 0.2, "every": 1000},
        }
    )


def test_breast_binary_reaches_high_auc_and_is_deterministic() -> None:
    spec = spec_for([("bank", "active"), ("shop", "passive")], "binary")
    first = run_inprocess(spec, breast())
    again = run_inprocess(spec, breast())
    assert first["bank"]["metrics"]["auc"] >= 0.98
    assert first["bank"]["metrics"] == again["bank"]["metrics"]
    assert first["bank"]["rounds"] == 5 * 8  # ceil(455 / 64) batches per epoch
    assert first["shop"]["bytes_sent"] > 0


def test_three_party_motor_regression() -> None:
    datasets = motor()
    spec = spec_for(
        [("plant", "active"), ("s1", "passive"), ("s2", "passive")],
        "regression",
        epochs=6,  # 60 rounds: r2 0.977 (200 rounds of batch 32: 0.989)
        batch_size=64,
        lr=0.05,
    )
    result = run_inprocess(spec, datasets)["plant"]
    assert result["metrics"]["r2"] >= 0.85


def test_vehicle_multiclass() -> None:
    datasets = {
        "a": {
            "d": TableSource(
                path=str(shared_data("fate", "vehicle_scale_hetero_guest.csv")), label="y"
            )
        },
        "b": {"d": TableSource(path=str(shared_data("fate", "vehicle_scale_hetero_host.csv")))},
    }
    spec = spec_for([("a", "active"), ("b", "passive")], "multiclass", epochs=30, batch_size=32)
    assert run_inprocess(spec, datasets)["a"]["metrics"]["accuracy"] >= 0.7


def test_partial_overlap_is_aligned_by_psi_without_sending_ids(tmp_path) -> None:
    host = tmp_path / "host.csv"
    lines = (FATE / "breast_hetero_host.csv").read_text().splitlines()
    host.write_text("\n".join(lines[:-69]) + "\n")  # the host lacks 69 of the 569 ids
    datasets = breast()
    datasets["shop"] = {"d": TableSource(path=str(host))}
    sent: list[bytes] = []
    spec = spec_for([("bank", "active"), ("shop", "passive")], "binary")
    result = run_inprocess(spec, datasets, hook=lambda d, s, r, tag, data: sent.append(data))
    assert result["bank"]["metrics"]["auc"] >= 0.97
    assert result["bank"]["rounds"] == 5 * 7  # 500 common rows: 400 train, batches of 64
    ids = [line.split(",")[0].encode() for line in lines[1:]]
    assert not any(i in d for d in sent for i in ids[:50] if len(i) >= 4)


@pytest.mark.parametrize("repeating", ["bank", "shop"])
def test_repeated_ids_fail_the_job_naming_the_dataset(tmp_path, repeating) -> None:
    # Prepare: one party's dataset "customers_2026" repeats the id of its first row
    source = FATE / f"breast_hetero_{'guest' if repeating == 'bank' else 'host'}.csv"
    lines = source.read_text().splitlines()
    table = tmp_path / "table.csv"
    table.write_text("\n".join([*lines, lines[1]]) + "\n")
    datasets = breast()
    label = "y" if repeating == "bank" else None
    datasets[repeating] = {"customers_2026": TableSource(path=str(table), label=label)}
    raw = spec_for([("bank", "active"), ("shop", "passive")], "binary").model_dump(
        mode="json", exclude_none=True
    )
    for party in raw["parties"]:
        if party["id"] == repeating:
            party["data"] = {"dataset": "customers_2026"}
    spec = parse_spec(raw)
    # Execute
    with pytest.raises(DataError) as err:
        run_inprocess(spec, datasets)
    # Assert: the repeating party refuses its input as it reads it (before PSI), naming
    # the dataset
    assert "dataset 'customers_2026': 1 of 570 rows repeat an id" in str(err.value)
    assert "deduplicate the id column" in str(err.value)


def test_binary_task_with_three_label_values_is_rejected() -> None:
    datasets = {
        "a": {
            "d": TableSource(
                path=str(shared_data("fate", "vehicle_scale_hetero_guest.csv")), label="y"
            )
        },
        "b": {"d": TableSource(path=str(shared_data("fate", "vehicle_scale_hetero_host.csv")))},
    }
    spec = spec_for([("a", "active"), ("b", "passive")], "binary")
    with pytest.raises(Exception, match="use task: multiclass"):
        run_inprocess(spec, datasets)
