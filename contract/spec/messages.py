"""Pydantic's validation errors as our messages: each problem names the field by its
dotted path (`train.lr`, `parties[1].data`) and says what the field accepts, read from
the same JSON Schema `vfl spec schema` prints. Unknown fields come first, with the
allowed ones listed."""

from __future__ import annotations

import functools
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError
from vfl.contract.errors import SpecError
from vfl.contract.spec.fields import FieldProblem

M = TypeVar("M", bound=BaseModel)

MAX_PROBLEMS = 8
_MAPPING_ERRORS = ("model_type", "model_attributes_type", "dict_type")


def explain(
    exc: ValidationError, model: type[BaseModel], where: str = "", whole: str = "the job spec"
) -> str:
    """One line per problem of `exc` (raised validating `model`).

    Args:
        where: the path of the validated value inside its file ("" for the whole file).
        whole: what the file is called when a problem concerns all of it.
    """
    schema = _schema_of(model)
    unknown: dict[tuple[Any, ...], list[str]] = {}
    lines: list[str] = []
    for error in exc.errors():
        if error["type"] in ("extra_forbidden", "invalid_key"):
            unknown.setdefault(tuple(error["loc"][:-1]), []).append(str(error["loc"][-1]))
        else:
            lines.append(_problem(error, schema, where, whole))
    for loc, keys in reversed(unknown.items()):
        parent = _path(where, loc)
        names = ", ".join(repr(_join(parent, key)) for key in keys)
        allowed = ", ".join(sorted(schema.at(loc).get("properties", {})))
        lines.insert(0, f"unknown field(s) {names} in {parent or whole}; allowed: {allowed}")
    lines = list(dict.fromkeys(lines))
    if len(lines) > MAX_PROBLEMS:
        lines[MAX_PROBLEMS:] = [f"... and {len(lines) - MAX_PROBLEMS} more problems"]
    return "\n".join(lines)


def _problem(error: Any, schema: _Schema, where: str, whole: str) -> str:
    kind, loc = error["type"], error["loc"]
    path = _path(where, loc)
    if kind == "json_invalid":
        return f"{whole} is not valid JSON: {error['ctx']['error']}"
    if kind in ("value_error", "assertion_error"):
        cause = error.get("ctx", {}).get("error")
        text = str(cause) if cause is not None else error["msg"]
        if isinstance(cause, FieldProblem):
            path, text = _join(path, cause.field), cause.problem
        return f"'{path}' {text}" if path else text
    field = schema.at(loc)
    if kind in _MAPPING_ERRORS:
        got = type(error["input"]).__name__
        return f"'{path}' must be a mapping, got {got}" if path else f"{whole} must be a mapping"
    hint = f" ({field['description']})" if field.get("description") else ""
    if kind == "missing":
        return f"'{path}' is required{hint}"
    if field.get("type") != "array":
        hint = ""
    return f"'{path}' must be {schema.describe(field)}; got {_show(error['input'])}{hint}"


def _path(where: str, loc: tuple[Any, ...]) -> str:
    path = where
    for part in loc:
        path = f"{path}[{part}]" if isinstance(part, int) else _join(path, str(part))
    return path


def _join(path: str, field: str) -> str:
    if not field or field.startswith("["):
        return path + field
    return f"{path}.{field}" if path else field


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else repr(value)


class _Schema:
    """A model's JSON Schema, walked by validation-error locations."""

    def __init__(self, model: type[BaseModel]) -> None:
        self.root = model.model_json_schema()
        self.defs = self.root.get("$defs", {})

    def deref(self, node: dict[str, Any]) -> dict[str, Any]:
        if "$ref" not in node:
            return node
        target = self.defs.get(node["$ref"].rsplit("/", 1)[-1], {})
        return {**target, **{k: v for k, v in node.items() if k != "$ref"}}

    def at(self, loc: tuple[Any, ...]) -> dict[str, Any]:
        """The schema of the value at `loc` ({} where the schema does not say)."""
        node = self.root
        for part in loc:
            node = self.deref(node)
            options = [self.deref(o) for o in node.get("anyOf", [])]
            node = next((o for o in options if o.get("type") != "null"), node)
            if isinstance(part, int):
                node = node.get("items", {})
            else:
                node = node.get("properties", {}).get(part, {})
        return self.deref(node)

    def describe(self, node: dict[str, Any], plural: bool = False) -> str:
        """What a value of this schema is: "an integer in [1, 4096]", "one of a, b"."""
        node = self.deref(node)
        if "anyOf" in node:
            options = [self.deref(o) for o in node["anyOf"]]
            text = " or ".join(self.describe(o, plural) for o in options if o.get("type") != "null")
            return f"{text}, or null" if len(options) > 1 and "null" in _types(options) else text
        if "enum" in node:
            return "one of " + ", ".join(str(v) for v in node["enum"])
        kind = str(node.get("type", ""))
        if kind == "boolean":
            return "true or false"
        if kind == "array":
            least = f"at least {node['minItems']} " if node.get("minItems") else ""
            return f"a list of {least}{self.describe(node.get('items', {}), plural=True)}"
        noun = {"integer": "integer", "number": "number", "object": "mapping"}.get(kind, "value")
        if kind == "string":
            noun = "non-empty string" if node.get("minLength") else "string"
        text = f"{noun}s" if plural else f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"
        return text + _range(node)


def _types(options: list[dict[str, Any]]) -> set[str]:
    return {str(o.get("type")) for o in options}


def _range(node: dict[str, Any]) -> str:
    lo_open, hi_open = "exclusiveMinimum" in node, "exclusiveMaximum" in node
    lo = node.get("exclusiveMinimum", node.get("minimum"))
    hi = node.get("exclusiveMaximum", node.get("maximum"))
    if lo is not None and hi is not None:
        return f" in {'(' if lo_open else '['}{_number(lo)}, {_number(hi)}{')' if hi_open else ']'}"
    if lo is not None:
        return f" {'>' if lo_open else '>='} {_number(lo)}"
    if hi is not None:
        return f" {'<' if hi_open else '<='} {_number(hi)}"
    return ""


@functools.cache
def _schema_of(model: type[BaseModel]) -> _Schema:
    return _Schema(model)


def parse_yaml(text: str, what: str) -> Any:
    """Raises:
    SpecError: the text is not YAML (names `what`, e.g. "job spec")."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SpecError(f"{what} is not valid YAML: {exc}") from exc


def validated(raw: Any, model: type[M], not_a_mapping: str) -> M:
    """`raw` (a decoded mapping) as `model`.

    Raises:
        SpecError: `raw` is no mapping (`not_a_mapping` says what it must be), or naming
            each invalid field by its dotted path.
    """
    if not isinstance(raw, dict):
        raise SpecError(not_a_mapping)
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise SpecError(explain(exc, model)) from None
