"""The coordinator's read-only web dashboard (`vfl coordinator serve --ui`): the job list,
a job's curves while it trains, the parties' health, the models.

`server` serves it (aiohttp, on the coordinator's event loop), `auth` decides who gets in
(a token printed at start, or a federation client certificate), `dashboard` is its read
model over the coordinator's store, life cycle and health monitor, and `static/` holds
the page, its script and style and the vendored chart library (uPlot, MIT): nothing is
fetched from elsewhere, so it works air-gapped.

    UiServer, parse_listen   the dashboard's server and its `--ui HOST:PORT`
    Dashboard                its read model
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vfl.coordinator.ui.dashboard import Dashboard
    from vfl.coordinator.ui.server import UiServer, parse_listen

# where each public name lives, imported on first use
_EXPORTS: dict[str, tuple[str, ...]] = {
    "vfl.coordinator.ui.dashboard": ("Dashboard",),
    "vfl.coordinator.ui.server": ("UiServer", "parse_listen"),
}
_MODULE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = [
    "Dashboard",
    "UiServer",
    "parse_listen",
]


def __getattr__(name: str) -> object:
    """A public name, imported from its module on first use (PEP 562)."""
    if name not in _MODULE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_MODULE[name]), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
