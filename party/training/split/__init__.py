"""`protocol: split`: plaintext split learning, the insecure baseline.

ActiveTrainer    the active party: its bottom model, the top model, loss, derivatives
PassiveTrainer   a passive party: its bottom model, activations out, derivatives in
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vfl.party.training.split.active import ActiveTrainer
    from vfl.party.training.split.passive import PassiveTrainer

# where each public name lives, imported on first use
_EXPORTS: dict[str, tuple[str, ...]] = {
    "vfl.party.training.split.active": ("ActiveTrainer",),
    "vfl.party.training.split.passive": ("PassiveTrainer",),
}
_MODULE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = [
    "ActiveTrainer",
    "PassiveTrainer",
]


def __getattr__(name: str) -> object:
    """A public name, imported from its module on first use (PEP 562)."""
    if name not in _MODULE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_MODULE[name]), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
