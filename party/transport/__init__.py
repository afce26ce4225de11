"""A party's wires: the gRPC data plane and what is checked on it.

GrpcChannel      the data plane, a `secure.channel.Channel` over gRPC (`grpc_channel`)
ShapedChannel    a channel with an emulated WAN link (`wan`)
AuditLog, read_audit    the wire audit of every envelope (`audit`)
summarize, leaks        reading an audit: per direction, plaintext found (`audit_check`)
ScoringPeers     the active party's calls to the passive ones of a scoring session
ping_peers       `vfl doctor`'s data-plane probe (`ping`)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vfl.party.transport.audit import AuditLog, read_audit
    from vfl.party.transport.audit_check import leaks, summarize
    from vfl.party.transport.grpc_channel import GrpcChannel
    from vfl.party.transport.ping import ping_peers
    from vfl.party.transport.scoring import ScoringPeers
    from vfl.party.transport.wan import ShapedChannel

# where each public name lives, imported on first use
_EXPORTS: dict[str, tuple[str, ...]] = {
    "vfl.party.transport.audit": ("AuditLog", "read_audit"),
    "vfl.party.transport.audit_check": ("leaks", "summarize"),
    "vfl.party.transport.grpc_channel": ("GrpcChannel",),
    "vfl.party.transport.ping": ("ping_peers",),
    "vfl.party.transport.scoring": ("ScoringPeers",),
    "vfl.party.transport.wan": ("ShapedChannel",),
}
_MODULE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = [
    "AuditLog",
    "GrpcChannel",
    "ScoringPeers",
    "ShapedChannel",
    "leaks",
    "ping_peers",
    "read_audit",
    "summarize",
]


def __getattr__(name: str) -> object:
    """A public name, imported from its module on first use (PEP 562)."""
    if name not in _MODULE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_MODULE[name]), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
