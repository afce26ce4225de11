"""CELU-VFL local updates: workset table, uniform sampling, instance weighting.

    LocalUpdateConfig   a job's `local_updates:` section (`config`)
    LocalUpdater        the local-update loop between communication rounds (`local_loop`)
    WorksetTable, CachedBatch   recently exchanged statistics, by batch (`workset`)
    UniformSampler      uniform sampling from the workset (`sampling`)
    instance_weights    CELU-VFL's instance weighting (`weighting`)
    CeluError and its subclasses (`errors`)

Nothing in this package imports grpc, `party` or `coordinator`. The names load on first
use (PEP 562): the job spec reads `config` without loading torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vfl.celu.config import LocalUpdateConfig
    from vfl.celu.errors import CeluError, LocalUpdateConfigError
    from vfl.celu.local_loop import LocalUpdater
    from vfl.celu.sampling import UniformSampler
    from vfl.celu.weighting import instance_weights
    from vfl.celu.workset import CachedBatch, WorksetTable

# where each public name lives, imported on first use
_EXPORTS: dict[str, tuple[str, ...]] = {
    "vfl.celu.config": ("LocalUpdateConfig",),
    "vfl.celu.errors": ("CeluError", "LocalUpdateConfigError"),
    "vfl.celu.local_loop": ("LocalUpdater",),
    "vfl.celu.sampling": ("UniformSampler",),
    "vfl.celu.weighting": ("instance_weights",),
    "vfl.celu.workset": ("CachedBatch", "WorksetTable"),
}
_MODULE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = [
    "CachedBatch",
    "CeluError",
    "LocalUpdateConfig",
    "LocalUpdateConfigError",
    "LocalUpdater",
    "UniformSampler",
    "WorksetTable",
    "instance_weights",
]


def __getattr__(name: str) -> object:
    """A public name, imported from its module on first use (PEP 562)."""
    if name not in _MODULE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_MODULE[name]), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
