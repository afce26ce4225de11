"""A party's state directory: its checkpoints (and key material) per job, and its model
parts, on its own disk.

<state_dir>/jobs/<job_id>/round-000120.ckpt    newest two kept, written atomically

    StateDir                   the folder and its atomic writes (`store`)
    Checkpoint, encode_checkpoint, decode_checkpoint   one checkpoint (`checkpoint`)
    JobCheckpoints             a job's checkpoints, when to write and which to resume
    ModelStore, Manifest       stored model parts and what each holds (`models`)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vfl.party.state.checkpoint import Checkpoint, decode_checkpoint, encode_checkpoint
    from vfl.party.state.checkpoints import JobCheckpoints
    from vfl.party.state.models import Manifest, ModelStore
    from vfl.party.state.store import StateDir

# where each public name lives, imported on first use
_EXPORTS: dict[str, tuple[str, ...]] = {
    "vfl.party.state.checkpoint": ("Checkpoint", "decode_checkpoint", "encode_checkpoint"),
    "vfl.party.state.checkpoints": ("JobCheckpoints",),
    "vfl.party.state.models": ("Manifest", "ModelStore"),
    "vfl.party.state.store": ("StateDir",),
}
_MODULE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = [
    "Checkpoint",
    "JobCheckpoints",
    "Manifest",
    "ModelStore",
    "StateDir",
    "decode_checkpoint",
    "encode_checkpoint",
]


def __getattr__(name: str) -> object:
    """A public name, imported from its module on first use (PEP 562)."""
    if name not in _MODULE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_MODULE[name]), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
