"""Job and prediction specs as the Python API and `vfl` take them: a job spec given as a
`JobSpec`, a mapping or a YAML file (`as_spec`), sent as YAML (`spec_to_yaml`); a
prediction spec from a model, each party's dataset and options, over an optional base
mapping or file (`prediction_yaml`). Each is validated here, before anything is dialled,
so a mistake names its field at once."""

from __future__ import annotations

from collections.abc import Mapping
from os import PathLike, fspath
from pathlib import Path
from typing import Any

import yaml
from vfl.contract.errors import SpecError
from vfl.contract.spec import JobSpec, load_spec, parse_spec
from vfl.contract.spec.predict import parse_predict_text

SpecLike = JobSpec | Mapping[str, Any] | str | PathLike[str]
PredictionBase = Mapping[str, Any] | str | PathLike[str]  # a mapping, or a YAML file's path


def as_spec(spec: SpecLike) -> JobSpec:
    """The validated `JobSpec` of `spec`: a `JobSpec` as it is, a mapping (e.g. a dict
    written in a notebook, data paths as given), or the path of a YAML file (relative data
    paths resolve against its folder).

    Raises:
        SpecError: the file is missing or not YAML, or a field is invalid (named by its
            dotted path, e.g. 'train.lr').
        TypeError: `spec` is none of these.
    """
    if isinstance(spec, JobSpec):
        return spec
    if isinstance(spec, Mapping):
        return parse_spec(dict(spec))
    if isinstance(spec, (str, PathLike)):
        return load_spec(fspath(spec))
    raise TypeError(
        f"a job spec is a JobSpec, a mapping or a YAML file's path, not {type(spec).__name__}"
    )


def spec_to_yaml(spec: JobSpec) -> str:
    """The YAML the coordinator takes (`SubmitJob`): every field, data without unset keys."""
    raw = spec.model_dump(mode="json")
    for p in raw["parties"]:
        p["data"] = {k: v for k, v in p["data"].items() if v is not None}
    text: str = yaml.safe_dump(raw, sort_keys=False)
    return text


def prediction_yaml(
    model: str | None = None,
    data: Mapping[str, str] | None = None,
    *,
    out: str | None = None,
    batch_size: int | None = None,
    base: PredictionBase | None = None,
) -> str:
    """A prediction spec's YAML (`SubmitPrediction`): `base` (a mapping, or a YAML file)
    with the model, each party's dataset (`data`, by party id), `out` and `batch_size`
    given here overriding its own.

    Raises:
        SpecError: `base` is missing or not a YAML mapping, or the spec is invalid (names
            the field).
    """
    raw = dict(_prediction_base(base))
    if model:
        raw["model"] = model
    if data:
        given = raw.get("data")
        raw["data"] = {**(given if isinstance(given, Mapping) else {}), **data}
    if out:
        raw["out"] = out
    if batch_size is not None:
        raw["batch_size"] = batch_size
    text: str = yaml.safe_dump(raw, sort_keys=False)
    parse_predict_text(text)  # fail here, with the field named, before dialling
    return text


def _prediction_base(base: PredictionBase | None) -> Mapping[str, Any]:
    if base is None or isinstance(base, Mapping):
        return base or {}
    path = Path(base)
    if not path.is_file():
        raise SpecError(f"prediction spec '{base}' does not exist")
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise SpecError(f"prediction spec '{base}' is not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise SpecError(f"prediction spec '{base}' is not a YAML mapping")
    return raw
