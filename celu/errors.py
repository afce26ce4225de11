"""Exceptions of the `celu` package.

    CeluError                   base of everything raised here
    ├── LocalUpdateConfigError  a LocalUpdateConfig built directly has an invalid field
    │                           (also a ValueError)
    ├── InvalidValue            a validator rejects a field's value (also a ValueError,
    │                           which pydantic turns into the field's error)
    ├── WorksetError            the workset table was used wrongly (also a ValueError)
    ├── WeightingError          tensors handed to instance weighting do not fit (also a ValueError)
    ├── SyntheticDataError      bad arguments to the synthetic CTR generator (also a ValueError)
    └── LocalUpdateWorkerError  the local-update worker failed or was driven out of order
                                (also a RuntimeError; a worker failure is its ``__cause__``)

Every message says what is wrong and what to do about it.
"""

from __future__ import annotations


class CeluError(Exception):
    """Base class of all errors raised by `celu`."""


class LocalUpdateConfigError(CeluError, ValueError):
    """A field of `LocalUpdateConfig` has an invalid value; the message names the field."""

    def __init__(self, field: str, problem: str, fix: str = "") -> None:
        self.field = field
        super().__init__(f"local_updates.{field}: {problem}" + (f"; {fix}" if fix else ""))


class InvalidValue(CeluError, ValueError):
    """A field validator of `LocalUpdateConfig` rejects a value; pydantic reports it with the
    field's path."""


class WorksetError(CeluError, ValueError):
    """The workset table or the sampler got an invalid argument."""


class WeightingError(CeluError, ValueError):
    """Tensors passed to instance weighting have mismatched or unsupported shapes."""


class SyntheticDataError(CeluError, ValueError):
    """`celu.synth_ctr` got an invalid row count, vocabulary or positive rate."""


class LocalUpdateWorkerError(CeluError, RuntimeError):
    """The background local-update worker failed, hung, or was used in the wrong state."""
