"""The party daemon: next to one organisation's data, it serves its datasets to jobs,
runs its training role, keeps its model parts and scores with them.

    PartyConfig, load_party_config    its config file (`vfl party serve --config`)
    create_party_server, PartyServer  the running daemon (gRPC server, registration)
    DaemonOptions, PartyDaemon        the daemon's logic: jobs, mailboxes, threads
    PartyError and its subclasses     what the party raises (`party.errors`)

Sub-packages: `training` (the roles), `inference` (batch and online scoring), `state`
(checkpoints and model parts on disk), `transport` (the gRPC data plane, wire audit).
The names load on first use (PEP 562), so importing one module of the party, e.g. its
config, does not start loading the whole daemon.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vfl.party.config import PartyConfig, load_party_config, parse_party_config
    from vfl.party.daemon import DaemonOptions, PartyDaemon
    from vfl.party.data import Table, load_table
    from vfl.party.errors import (
        AccessDenied,
        CheckpointError,
        ConfigError,
        DataError,
        JobError,
        ModelError,
        PartyError,
        PeerUnavailable,
        RequestError,
        ShuttingDown,
        UnknownModel,
    )
    from vfl.party.server import PartyServer, create_party_server

# where each public name lives, imported on first use
_EXPORTS: dict[str, tuple[str, ...]] = {
    "vfl.party.config": ("PartyConfig", "load_party_config", "parse_party_config"),
    "vfl.party.daemon": ("DaemonOptions", "PartyDaemon"),
    "vfl.party.data": ("Table", "load_table"),
    "vfl.party.errors": (
        "AccessDenied",
        "CheckpointError",
        "ConfigError",
        "DataError",
        "JobError",
        "ModelError",
        "PartyError",
        "PeerUnavailable",
        "RequestError",
        "ShuttingDown",
        "UnknownModel",
    ),
    "vfl.party.server": ("PartyServer", "create_party_server"),
}
_MODULE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = [
    "AccessDenied",
    "CheckpointError",
    "ConfigError",
    "DaemonOptions",
    "DataError",
    "JobError",
    "ModelError",
    "PartyConfig",
    "PartyDaemon",
    "PartyError",
    "PartyServer",
    "PeerUnavailable",
    "RequestError",
    "ShuttingDown",
    "Table",
    "UnknownModel",
    "create_party_server",
    "load_party_config",
    "load_table",
    "parse_party_config",
]


def __getattr__(name: str) -> object:
    """A public name, imported from its module on first use (PEP 562)."""
    if name not in _MODULE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_MODULE[name]), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
