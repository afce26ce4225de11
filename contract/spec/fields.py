"""What the job-spec models are built from: a frozen base that rejects unknown fields, the
field types YAML needs (names, text, numbers), and `FieldProblem` for validators.

Validators raise `FieldProblem` (or `ValueError`) with what is wrong and the fix; the
field's path is added when the error becomes a `SpecError` (`vfl.contract.spec.messages`).
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
_NAME = re.compile(NAME_PATTERN)


class FieldProblem(ValueError):
    """A validator's complaint about `field` (relative to the model being validated, e.g.
    ``key_bits`` or ``parties[1].data.label``; "" for the model itself)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(problem)
        self.field = field
        self.problem = problem


class SpecModel(BaseModel):
    """Frozen, rejects unknown fields; a section given as YAML null (``train:`` with
    nothing under it) gets its defaults."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _null_sections(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        sections = {k for k, f in cls.model_fields.items() if f.default_factory is not None}
        return {k: v for k, v in data.items() if v is not None or k not in sections}


def _name(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, str | int) or not _NAME.match(str(value)):
        raise ValueError(
            f"must be a name of letters, digits, '_', '.' or '-' (max 64), got {value!r}"
        )
    return str(value)


def _text(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
        raise ValueError(f"must be a non-empty string; got {value!r}")
    return str(value)


def _label(value: Any) -> Any:
    """`label: true` (a LIBSVM file carries labels) is "true"; `false` is no label."""
    if value is None or value is False:
        return None
    return "true" if value is True else _text(value)


def _number(value: Any) -> Any:
    """Numeric strings as numbers: YAML 1.1 reads `1e-3` (an exponent, no dot) as text."""
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            pass
    return value


# a party or job id
Name = Annotated[str, Field(pattern=NAME_PATTERN), BeforeValidator(_name)]
# a dataset name, path or column: a non-empty string (a YAML integer is read as its text)
Text = Annotated[str, Field(min_length=1), BeforeValidator(_text)]
Label = Annotated[str | None, BeforeValidator(_label)]
# a float field takes numbers (not bools) and numeric strings:
# Annotated[float, Field(gt=0, le=100, strict=True), NUMBER]
NUMBER = BeforeValidator(_number)
