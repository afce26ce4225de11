"""`LocalUpdateConfig`: which local updates a party runs between communication rounds.

The one model of these settings: a job spec's ``local_updates:`` section is this model, and
every party hands it unchanged to the local-update loop.

Modes (docs/protocols.md §6-7):

- ``none``: vanilla VFL, one model update per communication round.
- ``fedbcd``: after each round, ``steps`` (Q) consecutive local updates on the *current*
  batch with the partner's statistics frozen (FedBCD-p). Always synchronous, no table, no
  weighting.
- ``celu``: a workset table of ``workset`` (W) batches, each driving at most ``reuse`` (R)
  updates including its round, uniform sampling without repeats within W-1 samples, and
  instance weighting with threshold ``xi``. ``reuse=1`` is vanilla VFL.

Schedules are CELU's: ``async`` (the default) runs local updates in a background worker
that overlaps the wait for the network, at most ``steps`` between two rounds; ``sync``
runs up to ``steps`` of them right after each round, deterministically (tests,
reproducible runs). ``none`` and ``fedbcd`` always run synchronously, so for them an
omitted ``schedule`` is ``sync`` (and ``fedbcd`` rejects ``async``).
Each round brings one batch with R-1 local uses, so ``steps = reuse - 1`` lets
CELU run every use it is allowed; a smaller ``steps`` caps it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from vfl.celu.errors import InvalidValue, LocalUpdateConfigError


def _finite_number(value: object) -> float:
    """A finite float from a number (not a bool) or a numeric string ('5e-1': YAML 1.1
    reads a number with an exponent but no dot as text)."""
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidValue(f"must be a finite number or null, e.g. 0.5; got {value!r}")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise InvalidValue(f"must be a finite number or null, e.g. 0.5; got {value!r}")
    return number


class LocalUpdateConfig(BaseModel):
    """Local-update settings of one training job (identical at every party).

    Raises:
        pydantic.ValidationError: built directly, ``LocalUpdateConfig(steps=0)``; its
            errors locate the field (a job spec reports them as `SpecError`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", title="local_updates")

    mode: Literal["none", "fedbcd", "celu"] = Field(
        "none", description="none (vanilla VFL), fedbcd (Q local steps) or celu (CELU-VFL)"
    )
    steps: int = Field(
        5,
        ge=1,
        strict=True,
        description="FedBCD's Q (local steps per round); for celu, the most local updates "
        "between two rounds (set reuse - 1 to allow every reuse)",
    )
    workset: int = Field(
        5, ge=1, strict=True, description="W: batches kept in CELU's workset table"
    )
    reuse: int = Field(
        5,
        ge=1,
        strict=True,
        description="R: updates each cached batch may drive, its round included (1: vanilla)",
    )
    xi: Annotated[float, BeforeValidator(_finite_number)] | None = Field(
        0.5,
        description="instance-weighting threshold; null (or a value outside (-1, 1)) "
        "turns weighting off",
    )
    schedule: Literal["sync", "async"] = Field(
        "async",
        description="celu only: async overlaps local updates with the network, sync runs "
        "them after each round; none and fedbcd always run sync",
    )

    @model_validator(mode="before")
    @classmethod
    def _sync_unless_celu(cls, data: Any) -> Any:
        """`none` and `fedbcd` have no asynchronous schedule: unless given, theirs is sync."""
        if isinstance(data, dict) and "schedule" not in data and data.get("mode") != "celu":
            return {**data, "schedule": "sync"}
        return data

    @field_validator("schedule")
    @classmethod
    def _fedbcd_runs_sync(cls, schedule: str, info: ValidationInfo) -> str:
        if schedule == "async" and info.data.get("mode") == "fedbcd":
            raise InvalidValue(
                "must be sync for fedbcd, which runs synchronously; set schedule: sync or "
                "mode: celu"
            )
        return schedule

    @property
    def has_local_updates(self) -> bool:
        """False for vanilla VFL: mode ``none``, or ``celu`` with ``reuse=1``."""
        return self.mode == "fedbcd" or (self.mode == "celu" and self.reuse > 1)

    @property
    def weighting(self) -> bool:
        """Whether CELU instance weighting is on (``celu`` mode and ``-1 < xi < 1``)."""
        return self.mode == "celu" and self.xi is not None and -1.0 < self.xi < 1.0

    @property
    def effective_xi(self) -> float | None:
        """``xi`` when weighting is on, else None (pass this to `celu.weighting`)."""
        return self.xi if self.weighting else None

    @property
    def max_staleness(self) -> int:
        """W*R: the oldest (in this party's model updates) a cached batch may get."""
        return self.workset * self.reuse

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> LocalUpdateConfig:
        """Build from a job spec's ``local_updates`` mapping, rejecting unknown keys.

        Raises:
            LocalUpdateConfigError: an unknown key or an invalid value.
        """
        try:
            return cls.model_validate(dict(raw))
        except ValidationError as exc:
            raise _config_error(exc) from None


def _config_error(exc: ValidationError) -> LocalUpdateConfigError:
    """The first problem of a validation failure, as the field, what is wrong and the fix."""
    error = exc.errors()[0]
    field = ".".join(str(part) for part in error["loc"]) or "mode"
    if error["type"] in ("extra_forbidden", "invalid_key"):
        known = sorted(LocalUpdateConfig.model_fields)
        return LocalUpdateConfigError(field, "unknown setting", f"use only {known}")
    if error["type"] == "value_error":  # our validators' messages carry their fix
        return LocalUpdateConfigError(field, str(error["ctx"]["error"]))
    problem = f"{error['msg'][0].lower()}{error['msg'][1:]}, got {error['input']!r}"
    info = LocalUpdateConfig.model_fields.get(field)
    return LocalUpdateConfigError(field, problem, (info and info.description) or "")
