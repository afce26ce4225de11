"""Job spec parsing: defaults, round trip, and one clear error per kind of bad input."""

from __future__ import annotations

import pytest

from coordinator.errors import SpecError
from coordinator.spec import JobSpec, load_spec, parse_spec_text

GOOD = """
job: credit-demo
parties:
  - id: bank
    role: active
    data: {path: data/guest.csv, format: csv, id: id, label: y}
  - id: shop
    role: passive
    data: {path: data/host.csv, format: csv, id: id}
model:
  source: {out_dim: 16}
  top: {hidden: [32], task: binary}
protocol: split
local_updates: {mode: none}
train: {epochs: 3, batch_size: 256, lr: 0.05, optimizer: adagrad, seed: 0}
validation: {fraction: 0.2, every: 20}
"""


def test_issue_example_parses_with_defaults_and_round_trips() -> None:
    spec = parse_spec_text(GOOD)
    assert spec.active.id == "bank" and [p.id for p in spec.passives] == ["shop"]
    assert spec.model.top.hidden == (32,) and spec.train.optimizer == "adagrad"
    assert JobSpec.from_json(spec.to_json()) == spec


def test_minimal_spec_gets_defaults() -> None:
    spec = parse_spec_text(
        "parties: [{id: a, role: active, data: {dataset: d}}, "
        "{id: b, role: passive, data: {dataset: e}}]"
    )
    assert spec.train.epochs == 3 and spec.validation.fraction == 0.2
    assert spec.protocol == "split" and spec.model.source.out_dim == 16


def test_relative_paths_resolve_against_the_spec_folder(tmp_path) -> None:
    (tmp_path / "job.yaml").write_text(GOOD)
    spec = load_spec(tmp_path / "job.yaml")
    assert spec.active.data.path == str(tmp_path / "data" / "guest.csv")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("job: [unclosed", "not valid YAML"),
        ("- a list", "must be a YAML mapping"),
        (GOOD + "\nfoo: 1\n", "unknown field(s) 'foo'"),
        (GOOD.replace("lr: 0.05", "lr: -1"), "'train.lr'"),
        (GOOD.replace("optimizer: adagrad", "optimizer: rmsprop"), "'train.optimizer'"),
        (GOOD.replace("task: binary", "task: ranking"), "'model.top.task'"),
        (GOOD.replace("epochs: 3", "epochs: three"), "'train.epochs'"),
        (GOOD.replace("role: passive", "role: active"), "exactly one party with role: active"),
        (GOOD.replace("id: shop", "id: bank"), "duplicate ids"),
        (GOOD.replace("protocol: split", "protocol: magic"), "'protocol' must be one of"),
        (GOOD.replace(", label: y", ""), "'data.label' must name its label column"),
        (
            GOOD.replace("format: csv, id: id, label", "format: parquet, id: id, label"),
            "'parties[0].data.format'",
        ),
        (GOOD.replace("top: {hidden: [32]", "top: {hidden: [0]"), "'model.top.hidden[0]'"),
        (
            GOOD.replace("data: {path: data/host.csv, format: csv, id: id}", "data: {}"),
            "exactly one of 'dataset'",
        ),
        (GOOD.replace("fraction: 0.2", "fraction: 1.5"), "'validation.fraction'"),
    ],
)
def test_bad_specs_name_the_field(text: str, fragment: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_spec_text(text)
    assert fragment in str(err.value)


def test_missing_spec_file(tmp_path) -> None:
    with pytest.raises(SpecError, match="does not exist"):
        load_spec(tmp_path / "nope.yaml")
