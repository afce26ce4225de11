"""The tree section of the job spec: defaults, bounds naming their field, the protocols a
tree model trains under, and `vfl spec schema`."""

from __future__ import annotations

import pytest
from vfl.contract.errors import SpecError
from vfl.contract.spec import JobSpec, TreesSpec, job_schema, parse_spec_text

PARTIES = """
parties:
  - {id: bank, role: active, data: {dataset: d}}
  - {id: shop, role: passive, data: {dataset: d}}
"""


def test_a_tree_model_takes_every_default_and_round_trips() -> None:
    spec = parse_spec_text(PARTIES + "model: {trees: {}}")
    assert spec.model.kind == "trees" and spec.model.task == "binary"
    assert spec.model.trees == TreesSpec()
    assert (spec.model.trees.count, spec.model.trees.depth, spec.model.trees.bins) == (100, 5, 32)
    assert spec.protocol == "split"
    assert JobSpec.from_json(spec.to_json()) == spec
    assert parse_spec_text(PARTIES).model.kind == "network"


def test_the_task_of_a_tree_model_is_its_own() -> None:
    spec = parse_spec_text(PARTIES + "model: {trees: {task: multiclass, count: 3}}")
    assert spec.model.task == "multiclass"


@pytest.mark.parametrize(
    ("model", "fragment"),
    [
        ("{trees: {count: 0}}", "'model.trees.count' must be an integer in [1, 10000]"),
        ("{trees: {depth: 13}}", "'model.trees.depth' must be an integer in [1, 12]"),
        ("{trees: {bins: 1}}", "'model.trees.bins' must be an integer in [2, 255]"),
        ("{trees: {bins: 256}}", "'model.trees.bins'"),
        ("{trees: {learning_rate: 0}}", "'model.trees.learning_rate' must be a number in (0, 1]"),
        ("{trees: {l2: -1}}", "'model.trees.l2'"),
        ("{trees: {min_child_weight: -0.5}}", "'model.trees.min_child_weight'"),
        ("{trees: {subsample: 1.5}}", "'model.trees.subsample'"),
        ("{trees: {early_stopping: 0}}", "'model.trees.early_stopping'"),
        ("{trees: {active_trees: -1}}", "'model.trees.active_trees' must be an integer"),
        ("{trees: {active_levels: 13}}", "'model.trees.active_levels' must be an integer"),
        ("{trees: {active_levels: 1.5}}", "'model.trees.active_levels'"),
        ("{trees: {task: ranking}}", "'model.trees.task'"),
        ("{trees: {leaves: 8}}", "unknown field(s) 'model.trees.leaves'"),
        ("{trees: {}, top: {hidden: [8]}}", "'model.trees' cannot go with top"),
    ],
)
def test_a_bad_tree_section_names_its_field(model: str, fragment: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_spec_text(PARTIES + f"model: {model}")
    assert fragment in str(err.value)


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ("protocol: blindfl", "'protocol' is blindfl: a trees model trains under split"),
        ("protocol: secureboost\ncrypto: {scheme: bfv}", "'crypto.scheme' is bfv"),
        ("local_updates: {mode: celu}", "'local_updates' are for network models"),
        ("defence: {gradient_noise: 1}", "'defence' is for network models"),
    ],
)
def test_what_a_tree_model_does_not_train_under_is_named(extra: str, fragment: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_spec_text(PARTIES + "model: {trees: {}}\n" + extra)
    assert fragment in str(err.value)


def test_secureboost_trains_trees_under_2048_bit_keys_by_default() -> None:
    spec = parse_spec_text(PARTIES + "model: {trees: {}}\nprotocol: secureboost")
    assert spec.protocol == "secureboost" and spec.crypto.key_bits == 2048
    with pytest.raises(SpecError, match="'crypto.key_bits' is 1024: keys below 2048 bits"):
        parse_spec_text(
            PARTIES + "model: {trees: {}}\nprotocol: secureboost\ncrypto: {key_bits: 1024}"
        )


def test_secureboost_is_for_trees() -> None:
    with pytest.raises(SpecError, match="a network model trains under split or blindfl"):
        parse_spec_text(PARTIES + "protocol: secureboost")


def test_the_schema_shows_the_tree_section() -> None:
    schema = job_schema()
    trees = schema["$defs"]["TreesSpec"]["properties"]
    assert {"count", "depth", "bins", "learning_rate", "l2", "min_child_weight"} <= set(trees)
    assert {"subsample", "early_stopping", "task"} <= set(trees)
    assert trees["active_trees"]["default"] == trees["active_levels"]["default"] == 0
    assert trees["depth"]["maximum"] == 12 and trees["bins"]["maximum"] == 255
    assert "secureboost" in schema["properties"]["protocol"]["enum"]
