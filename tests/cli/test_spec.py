"""`vfl spec check | schema`, in process through the CLI's `main`."""

from __future__ import annotations

import json

from vfl.cli.main import main
from vfl.contract.spec import JobSpec

from tests.contract.test_spec import GOOD


def test_check_prints_ok_with_name_protocol_and_parties(tmp_path, capsys) -> None:
    (tmp_path / "job.yaml").write_text(GOOD)
    code = main(["spec", "check", str(tmp_path / "job.yaml")])
    out = capsys.readouterr().out
    assert code == 0
    assert out == f"{tmp_path / 'job.yaml'}: ok (credit-demo, protocol split, 2 parties)\n"


def test_check_exits_2_with_the_field_and_the_file(tmp_path, capsys) -> None:
    (tmp_path / "job.yaml").write_text(GOOD.replace("lr: 0.05", "lr: -1"))
    code = main(["spec", "check", str(tmp_path / "job.yaml")])
    err = capsys.readouterr().err
    assert code == 2
    assert f"{tmp_path / 'job.yaml'}: 'train.lr' must be a number in (0, 100]; got -1" in err


def test_check_of_a_missing_file_exits_2(tmp_path, capsys) -> None:
    assert main(["spec", "check", str(tmp_path / "nope.yaml")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_schema_describes_the_spec_with_its_defaults_and_bounds(tmp_path, capsys) -> None:
    assert main(["spec", "schema"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert main(["spec", "schema", "--out", str(tmp_path / "job.schema.json")]) == 0
    written = json.loads((tmp_path / "job.schema.json").read_text())
    assert printed == written
    assert printed["$schema"].startswith("https://json-schema.org/")
    assert printed["required"] == ["parties"] and printed["additionalProperties"] is False
    assert set(printed["properties"]) == set(JobSpec.model_fields)
    train = printed["$defs"]["TrainSpec"]["properties"]
    assert train["lr"]["default"] == 0.05 and train["lr"]["exclusiveMinimum"] == 0
    assert train["epochs"]["minimum"] == 1 and train["optimizer"]["enum"] == [
        "adagrad",
        "sgd",
        "adam",
    ]
    schedule = printed["$defs"]["LocalUpdateConfig"]["properties"]["schedule"]
    assert schedule["default"] == "async"
