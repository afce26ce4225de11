"""Reading a job spec: a YAML file or text (`load_spec`, `parse_spec_text`) or a decoded
mapping (`parse_spec`); `JobSpec.from_json` reads the canonical JSON that crosses the wire.

Every function raises `SpecError` naming the field and the fix; none pickles anything.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vfl.contract.errors import SpecError
from vfl.contract.spec.messages import parse_yaml, validated
from vfl.contract.spec.model import JobSpec

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def load_spec(path: str | Path) -> JobSpec:
    """Read and validate a job spec file; relative data paths resolve against its folder.

    Raises:
        SpecError: the file is missing, is not YAML, or fails validation.
    """
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"job spec '{path}' does not exist; pass the path of a YAML job file")
    spec = parse_spec_text(p.read_text())
    return _resolve_paths(spec, p.resolve().parent)


def parse_spec_text(text: str) -> JobSpec:
    """Raises:
    SpecError: the text is not YAML or fails validation."""
    return parse_spec(parse_yaml(text, "job spec"))


def parse_spec(raw: Any) -> JobSpec:
    """Validate a decoded spec (a mapping) into the frozen `JobSpec`.

    Raises:
        SpecError: naming each invalid field by its dotted path.
    """
    return validated(
        raw, JobSpec, "job spec must be a YAML mapping with at least 'job' and 'parties'"
    )


def job_schema() -> dict[str, Any]:
    """The JSON Schema of a job spec, for editors (`vfl spec schema`)."""
    return {"$schema": SCHEMA_DIALECT, **JobSpec.model_json_schema()}


def _resolve_paths(spec: JobSpec, base: Path) -> JobSpec:
    for p in spec.parties:
        changes = {
            key: str(base / value)
            for key in ("path", "test_path")
            if (value := getattr(p.data, key)) and not Path(value).is_absolute()
        }
        if changes:
            spec = spec.with_data(p.id, p.data.model_copy(update=changes))
    return spec
