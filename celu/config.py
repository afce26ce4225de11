"""`LocalUpdateConfig`: which local updates a party runs between communication rounds.

Modes (docs/protocols.md §6-7):

- ``none``: vanilla VFL, one model update per communication round.
- ``fedbcd``: after each round, ``steps`` (Q) consecutive local updates on the *current*
  batch with the partner's statistics frozen (FedBCD-p). Always synchronous, no table, no
  weighting.
- ``celu``: a workset table of ``workset`` (W) batches, each driving at most ``reuse`` (R)
  updates including its round, uniform sampling without repeats within W-1 samples, and
  instance weighting with threshold ``xi``. ``reuse=1`` is vanilla VFL.

Schedules (``celu`` only): ``sync`` runs up to ``steps`` local updates right after each
round, deterministically (tests, reproducible runs); ``async`` runs them in a background
worker that overlaps the wait for the network, also at most ``steps`` between two rounds.
Each round brings one batch with R-1 local uses, so ``steps = reuse - 1`` lets
CELU run every use it is allowed; a smaller ``steps`` caps it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from celu.errors import LocalUpdateConfigError

MODES = ("none", "fedbcd", "celu")
SCHEDULES = ("sync", "async")


def _positive_int(name: str, value: object, fix: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise LocalUpdateConfigError(name, f"expected an integer, got {value!r}", fix)
    if value < 1:
        raise LocalUpdateConfigError(name, f"must be >= 1, got {value}", fix)


@dataclass(frozen=True)
class LocalUpdateConfig:
    """Local-update settings of one training job (identical at every party).

    Attributes:
        mode: ``none``, ``fedbcd`` or ``celu``.
        steps: FedBCD's Q (local steps per round); for ``celu``, the most local updates
            run between two rounds, in either schedule (fewer when nothing is eligible).
        workset: W, batches kept in the workset table.
        reuse: R, updates each cached batch may drive, its communication round included.
        xi: similarity threshold; None (or outside (-1, 1)) turns weighting off.
        schedule: ``sync`` or ``async`` (``async`` is only for ``celu``).

    Raises:
        LocalUpdateConfigError: naming the field and the fix, for any invalid value.
    """

    mode: str = "none"
    steps: int = 5
    workset: int = 5
    reuse: int = 5
    xi: float | None = 0.5
    schedule: str = "sync"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise LocalUpdateConfigError(
                "mode", f"unknown mode {self.mode!r}", f"use one of {MODES}"
            )
        _positive_int("steps", self.steps, "set steps >= 1 (FedBCD's Q, or CELU's cap per round)")
        _positive_int("workset", self.workset, "workset must be >= 1 batch (default 5)")
        _positive_int("reuse", self.reuse, "reuse must be >= 1 (1 means vanilla VFL, default 5)")
        self._check_xi()
        if self.schedule not in SCHEDULES:
            raise LocalUpdateConfigError(
                "schedule", f"unknown schedule {self.schedule!r}", f"use one of {SCHEDULES}"
            )
        if self.schedule == "async" and self.mode == "fedbcd":
            raise LocalUpdateConfigError(
                "schedule", "fedbcd runs synchronously", "set schedule: sync or mode: celu"
            )

    def _check_xi(self) -> None:
        xi = self.xi
        if xi is None:
            return
        if isinstance(xi, bool) or not isinstance(xi, (int, float)) or not math.isfinite(xi):
            raise LocalUpdateConfigError(
                "xi", f"expected a finite number or null, got {xi!r}", "use e.g. 0.5, or null"
            )

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
        """Build from a job spec's ``local_updates`` mapping, rejecting unknown keys."""
        known = {f.name for f in fields(cls)}
        for key in raw:
            if key not in known:
                raise LocalUpdateConfigError(
                    str(key), "unknown setting", f"use only {sorted(known)}"
                )
        return cls(**dict(raw))
