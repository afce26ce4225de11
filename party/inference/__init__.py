"""Scoring with stored models: batch prediction jobs and online scoring.

PredictJob       a batch prediction at one party: PSI, then the stored model (`batch`)
LoadedModel      one party's part of a stored model, loaded to score (`model`)
OnlineScoring    online scoring at a party daemon: sessions per model (`online`)
ServedModel      one model served at its active party, micro-batched (`serving`)
Prediction, IdResult   what online scoring answers, per request and per id
ActiveSession, PassiveSession, Rows   a scoring session's two sides and its rows
MicroBatcher     concurrent requests gathered into batches (`batcher`)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vfl.party.inference.batch import PredictJob
    from vfl.party.inference.batcher import MicroBatcher
    from vfl.party.inference.model import LoadedModel
    from vfl.party.inference.online import OnlineScoring
    from vfl.party.inference.serving import IdResult, Prediction, ServedModel
    from vfl.party.inference.session import ActiveSession, PassiveSession, Rows

# where each public name lives, imported on first use
_EXPORTS: dict[str, tuple[str, ...]] = {
    "vfl.party.inference.batch": ("PredictJob",),
    "vfl.party.inference.batcher": ("MicroBatcher",),
    "vfl.party.inference.model": ("LoadedModel",),
    "vfl.party.inference.online": ("OnlineScoring",),
    "vfl.party.inference.serving": ("IdResult", "Prediction", "ServedModel"),
    "vfl.party.inference.session": ("ActiveSession", "PassiveSession", "Rows"),
}
_MODULE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = [
    "ActiveSession",
    "IdResult",
    "LoadedModel",
    "MicroBatcher",
    "OnlineScoring",
    "PassiveSession",
    "PredictJob",
    "Prediction",
    "Rows",
    "ServedModel",
]


def __getattr__(name: str) -> object:
    """A public name, imported from its module on first use (PEP 562)."""
    if name not in _MODULE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_MODULE[name]), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
