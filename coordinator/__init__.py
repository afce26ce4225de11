"""The coordinator daemon: the job store, the job life cycle, the models' registry and the
dashboard. It never holds data, keys, activations or derivatives.

    CoordinatorClient, JobView    the typed gRPC client (`client`: what the CLI, the
                                  Python API and party daemons use)
    create_coordinator_server, CoordinatorServer   the running daemon (`server`)
    Lifecycle, JobStore           submit, launch, fold in reports; the SQLite job store
    diagnose                      `vfl doctor`'s checks (`doctor`)
    CoordinatorError and its subclasses   what the coordinator raises (`errors`)

The errors load with the package; every other name on first use (PEP 562), so a party
daemon that imports `vfl.coordinator.client` does not load the coordinator daemon.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from vfl.coordinator.errors import (
    AccessDenied,
    CoordinatorError,
    CoordinatorLost,
    PartyUnavailable,
    StoreInUse,
    UnknownJob,
    UnknownModel,
)

if TYPE_CHECKING:
    from vfl.coordinator.client import CoordinatorClient, JobView
    from vfl.coordinator.doctor import diagnose
    from vfl.coordinator.lifecycle import Lifecycle
    from vfl.coordinator.server import CoordinatorServer, create_coordinator_server
    from vfl.coordinator.store import JobStore

# where each public name lives, imported on first use
_EXPORTS: dict[str, tuple[str, ...]] = {
    "vfl.coordinator.client": ("CoordinatorClient", "JobView"),
    "vfl.coordinator.doctor": ("diagnose",),
    "vfl.coordinator.lifecycle": ("Lifecycle",),
    "vfl.coordinator.server": ("CoordinatorServer", "create_coordinator_server"),
    "vfl.coordinator.store": ("JobStore",),
}
_MODULE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = [
    "AccessDenied",
    "CoordinatorClient",
    "CoordinatorError",
    "CoordinatorLost",
    "CoordinatorServer",
    "JobStore",
    "JobView",
    "Lifecycle",
    "PartyUnavailable",
    "StoreInUse",
    "UnknownJob",
    "UnknownModel",
    "create_coordinator_server",
    "diagnose",
]


def __getattr__(name: str) -> object:
    """A public name, imported from its module on first use (PEP 562)."""
    if name not in _MODULE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_MODULE[name]), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
