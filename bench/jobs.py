"""The benchmarks' job specs, as the mappings a spec file holds (`yaml.safe_dump` one for
`vfl submit`, or `vfl.specs.parse_spec` it): two parties, an active one with the label
and a passive one, and only the sections a benchmark sets (every other field takes the
spec's default).

    job_spec("credit-split", "split", table_data(bank), table_data(shop),
             model=binary_model(16, [32]), train={"epochs": 3})
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vfl.celu.synth_ctr import CATEGORICAL_FIELDS
from vfl.contract.spec import TableSource

Data = Mapping[str, Any]  # a party's `data:`: a file ({"path": ...}) or {"dataset": name}


def job_spec(
    job: str,
    protocol: str | None,
    active: Data,
    passive: Data,
    *,
    key_bits: int | None = None,
    model: Mapping[str, Any] | None = None,
    train: Mapping[str, Any] | None = None,
    validation: Mapping[str, Any] | None = None,
    ids: tuple[str, str] = ("bank", "shop"),
    **sections: Any,
) -> dict[str, Any]:
    """The spec of job `job`: party `ids[0]` active reading `active`, `ids[1]` passive
    reading `passive`; `key_bits` gives a `crypto` section (test keys below 2048 bits);
    `sections` are more top-level sections as given (`network`, `local_updates`)."""
    spec: dict[str, Any] = {
        "job": job,
        "parties": [
            {"id": ids[0], "role": "active", "data": dict(active)},
            {"id": ids[1], "role": "passive", "data": dict(passive)},
        ],
    }
    if protocol is not None:
        spec["protocol"] = protocol
    if key_bits is not None:
        spec["crypto"] = crypto(key_bits)
    given = {"model": model, "train": train, "validation": validation, **sections}
    spec.update({k: dict(v) for k, v in given.items() if v is not None})
    return spec


def crypto(key_bits: int) -> dict[str, Any]:
    """The crypto section for `key_bits`-bit keys (below 2048: INSECURE test keys)."""
    return {"key_bits": key_bits, "allow_insecure_test_keys": key_bits < 2048}


def binary_model(out_dim: int, hidden: list[int], **source: Any) -> dict[str, Any]:
    """A source layer of `out_dim` (with `source`'s other fields) under a binary top of
    `hidden` layers ([]: logistic)."""
    return {"source": {"out_dim": out_dim, **source}, "top": {"hidden": hidden, "task": "binary"}}


def table_data(table: TableSource) -> dict[str, Any]:
    """A party's `data:` reading `table`'s file, with the fields given for it."""
    return {"path": table.path, **table.given()}


def ctr_data(folder: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The `data:` of the active and the passive party for `vfl.celu.synth_ctr`'s tables
    in `folder` (active.csv with the label, passive.csv with the categorical fields)."""
    active = {"path": str(folder / "active.csv"), "label": "y"}
    return active, {"path": str(folder / "passive.csv"), "categorical": list(CATEGORICAL_FIELDS)}


def on_datasets(spec: dict[str, Any], dataset: str = "data") -> dict[str, Any]:
    """`spec` with each party reading its dataset `dataset` (as a party config exposes its
    table; `vfl.local` names them "data") instead of its file."""
    for party in spec["parties"]:
        party["data"] = {"dataset": dataset}
    return spec


def predict_request(model: str, dataset: str = "data") -> dict[str, Any]:
    """A batch prediction with `model` over each credit party's dataset `dataset`."""
    return {"model": model, "data": {"bank": dataset, "shop": dataset}}
