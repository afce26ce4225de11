"""`vfl`, the command line (`main`), a thin shell over the Python API (`vfl.Client`,
`vfl.specs`, `vfl.scoring`, `vfl.watching`) and the daemons' entry points.

    main, build_parser   the command and its arguments (`main`)

Each command is a module with `add_parser` (`jobs`, `models`, `predict`, `score`,
`certs`, `run`, `demo`, ...); `local` and `topology` start a federation as local
processes (`vfl run`, `vfl demo`, `vfl.local_federation`). The names load on first use
(PEP 562): `python -m vfl.cli.main` and the daemons' worker processes load nothing else.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vfl.cli.main import build_parser, main

# where each public name lives, imported on first use
_EXPORTS: dict[str, tuple[str, ...]] = {
    "vfl.cli.main": ("build_parser", "main"),
}
_MODULE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = [
    "build_parser",
    "main",
]


def __getattr__(name: str) -> object:
    """A public name, imported from its module on first use (PEP 562)."""
    if name not in _MODULE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_MODULE[name]), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
