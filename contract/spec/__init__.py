"""The job spec: the one validated model of a job, from the YAML file a person writes to
every party.

`JobSpec` and its sections are frozen pydantic models that reject unknown fields; every
field but `parties` has a default. Invalid input raises `SpecError` naming the field by
its dotted path and the fix. The spec crosses the wire as its canonical JSON
(`JobSpec.to_json`, read back by `JobSpec.from_json`), parsed once per job per process.

- `model.py`: `JobSpec`, `PartySpec` and the sections (`ModelSpec`, `TrainSpec`,
  `ValidationSpec`, `NetworkSpec`); `local_updates` is
  `celu.config.LocalUpdateConfig`; `trees.py`: `TreesSpec`, the model section of a
  gradient-boosted tree ensemble.
- `crypto.py`: `CryptoSpec` and `BfvSpec` (the `crypto:` section).
  gradient-boosted tree ensemble; `features.py`: `FeaturesSpec`, WOE/IV bins and the
  columns a job keeps by IV.
- `data.py`: `TableSource` (a table file: a party config's dataset, or a job's file) and
  `DataSpec` (a party's rows in a job).
- `fields.py`: the base model and field types; `messages.py`: errors as messages;
  `load.py`: reading YAML and JSON, the JSON Schema.
"""

from vfl.contract.spec.crypto import BfvSpec, CryptoSpec
from vfl.contract.spec.data import DataSpec, TableColumns, TableSource
from vfl.contract.spec.features import FeaturesSpec, SelectSpec
from vfl.contract.spec.load import (
    job_schema,
    load_spec,
    parse_spec,
    parse_spec_text,
)
from vfl.contract.spec.messages import explain
from vfl.contract.spec.model import (
    DefenceSpec,
    JobSpec,
    ModelSpec,
    NetworkSpec,
    PartySpec,
    SourceSpec,
    TopSpec,
    TrainSpec,
    ValidationSpec,
)
from vfl.contract.spec.trees import TreesSpec

__all__ = [
    "BfvSpec",
    "CryptoSpec",
    "DefenceSpec",
    "DataSpec",
    "FeaturesSpec",
    "JobSpec",
    "ModelSpec",
    "NetworkSpec",
    "PartySpec",
    "SelectSpec",
    "SourceSpec",
    "TableColumns",
    "TableSource",
    "TopSpec",
    "TrainSpec",
    "TreesSpec",
    "ValidationSpec",
    "explain",
    "job_schema",
    "load_spec",
    "parse_spec",
    "parse_spec_text",
]
