"""The party's training roles: the active party (top model, loss, metrics) and passive
parties (bottom models), written against `secure.channel.Channel` only.

    Trainer                 what every role offers (`trainers.make` picks a party's role)
    RoleContext             what a role needs: spec, channel, inputs, plan (`context`)
    Plan, make_plan         the schedule every party derives from the spec (`plan`)
    Task, make_task         the active party's label encoding, loss, metrics (`task`)

`split/` holds the plaintext split-learning roles, `blindfl/` the BlindFL ones.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vfl.party.training.context import RoleContext
    from vfl.party.training.plan import Plan, make_plan
    from vfl.party.training.task import Task, make_task
    from vfl.party.training.trainers import Trainer

# where each public name lives, imported on first use
_EXPORTS: dict[str, tuple[str, ...]] = {
    "vfl.party.training.context": ("RoleContext",),
    "vfl.party.training.plan": ("Plan", "make_plan"),
    "vfl.party.training.task": ("Task", "make_task"),
    "vfl.party.training.trainers": ("Trainer",),
}
_MODULE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = [
    "Plan",
    "RoleContext",
    "Task",
    "Trainer",
    "make_plan",
    "make_task",
]


def __getattr__(name: str) -> object:
    """A public name, imported from its module on first use (PEP 562)."""
    if name not in _MODULE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_MODULE[name]), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
