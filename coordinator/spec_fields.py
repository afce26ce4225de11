"""Validators for job-spec fields: each checks one value and raises `SpecError` naming
the field by its dotted path and what would be accepted."""

from __future__ import annotations

import re
from typing import Any

from coordinator.errors import SpecError

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def fields(raw: Any, where: str, allowed: set[str]) -> dict[str, Any]:
    label = where or "the job spec"
    if not isinstance(raw, dict):
        raise SpecError(f"'{where}' must be a mapping, got {type(raw).__name__}")
    unknown = sorted(set(map(str, raw)) - allowed)
    if unknown:
        raise SpecError(
            f"unknown field(s) {', '.join(repr(join(where, u)) for u in unknown)} in {label}; "
            f"allowed: {', '.join(sorted(allowed))}"
        )
    return raw


def join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def name(value: Any, where: str) -> str:
    if not isinstance(value, str | int) or not _NAME.match(str(value)):
        raise SpecError(
            f"'{where}' must be a name of letters, digits, '_', '.' or '-' (max 64), got {value!r}"
        )
    return str(value)


def choice(value: Any, where: str, options: tuple[str, ...]) -> str:
    if value not in options:
        raise SpecError(f"'{where}' must be one of {', '.join(options)}; got {value!r}")
    return str(value)


def integer(value: Any, where: str, lo: int, hi: int | None = None) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < lo
        or (hi is not None and value > hi)
    ):
        rng = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise SpecError(f"'{where}' must be an integer {rng}; got {value!r}")
    return value


def number(value: Any, where: str, lo: float, hi: float, *, open_lo: bool = False) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if ok:
        v = float(value)
        ok = (v > lo if open_lo else v >= lo) and v <= hi
    if not ok:
        raise SpecError(
            f"'{where}' must be a number in {'(' if open_lo else '['}{lo}, {hi}]; got {value!r}"
        )
    return float(value)


def int_list(value: Any, where: str) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise SpecError(f"'{where}' must be a list of layer widths such as [32], or []")
    return tuple(integer(v, f"{where}[{i}]", 1, 65536) for i, v in enumerate(value))


def names(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise SpecError(f"'{where}' must be a list of column names, e.g. [C1, C2]")
    return tuple(value)
