"""Each protocol package raises only exceptions of its own tree (one root to catch)."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _tree(package: str, root: type[Exception]) -> set[str]:
    """Names of the classes under `root` that the package's modules define or import."""
    names = set()
    module = importlib.import_module(package)
    for info in pkgutil.walk_packages(module.__path__, f"{package}."):
        for name, value in vars(importlib.import_module(info.name)).items():
            if inspect.isclass(value) and issubclass(value, root):
                names.add(name)
    return names


def _raised(path: Path) -> list[tuple[int, str]]:
    """(line, class name) of every `raise Name(...)` and `raise Name` in a module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Raise) or node.exc is None:
            continue
        exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        if isinstance(exc, ast.Name) and exc.id[:1].isupper():
            found.append((node.lineno, exc.id))
        elif isinstance(exc, ast.Attribute) and exc.attr[:1].isupper():
            found.append((node.lineno, exc.attr))
    return found


ROOTS = [
    ("secure", "vfl.secure.errors.SecureError"),
    ("celu", "vfl.celu.errors.CeluError"),
    ("attack", "vfl.attack.errors.AttackError"),
]


@pytest.mark.parametrize(("package", "root"), ROOTS)
def test_every_raise_belongs_to_the_package_error_tree(package: str, root: str) -> None:
    module, _, name = root.rpartition(".")
    tree = _tree(f"vfl.{package}", getattr(importlib.import_module(module), name))
    stray = [
        f"{path.relative_to(REPO)}:{line} raises {raised}"
        for path in sorted((REPO / package).rglob("*.py"))
        for line, raised in _raised(path)
        if raised not in tree
    ]
    assert not stray, f"raise a subclass of {root} instead (see {module}): {stray}"
