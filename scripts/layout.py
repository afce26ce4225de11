"""Print the shape of a checkout: its packages, the imports between them, cycles, and the
largest modules and classes by line count.

    python scripts/layout.py [REPO]        (default: this checkout)

Reads the code as text (ast), runs none of it; generated protobuf code is left out.
Works on the tree before the `vfl` namespace too (imports named `proto.…`, `party.…`).
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

FOLDERS = (
    "proto",
    "rpc",
    "contract",
    "party",
    "coordinator",
    "secure",
    "celu",
    "cli",
    "attack",
    "vfl",
)
LIMIT = 400  # lines: a hand-written module over this is to be split


def package_of(module: str) -> str | None:
    """The package a module belongs to: its top-level folder (`vfl.party.job` -> `party`),
    but `rpc` (gRPC plumbing, beside the generated messages) counts on its own."""
    names = module.split(".")
    if names[0] == "vfl":
        names = names[1:]
        if not names or names[0] not in FOLDERS:
            return "vfl"  # the root package: the public API
    if names[0] not in FOLDERS:
        return None
    return names[0]


def modules(repo: Path) -> dict[str, Path]:
    """Dotted name (without `vfl.`) -> file, for every module of ours."""
    found = {}
    for folder in FOLDERS:
        for path in sorted((repo / folder).rglob("*.py")):
            if "_pb2" in path.name:
                continue
            rel = path.relative_to(repo).with_suffix("").parts
            rel = rel[:-1] if rel[-1] == "__init__" else rel
            # vfl/ holds the root package itself; every other folder is vfl.<folder>
            found[".".join(rel)] = path
    return found


def imported(tree: ast.AST) -> list[str]:
    """Every module an import names, at any depth (inside a function too), but those under
    `if TYPE_CHECKING:`, which never run. `from a import b` names `a.b` as well, in case
    `b` is a module (`module_edges` keeps the names that are)."""
    names = []
    skip = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for n in ast.walk(node)
    }
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
            names += [f"{node.module}.{a.name}" for a in node.names]
    return names


def own(name: str) -> str | None:
    """`vfl.party.job` and `party.job` -> `party.job`; None for other libraries."""
    names = name.split(".")
    if names[0] == "vfl":
        names = names[1:] if names[1:] and names[1] in FOLDERS else ["vfl", *names[1:]]
    return ".".join(names) if names and names[0] in FOLDERS else None


def module_edges(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of ours it imports (a name that is not a module of ours, such as
    a class in `from a import B`, is dropped)."""
    edges: dict[str, set[str]] = defaultdict(set)
    for name, path in mods.items():
        for target in imported(ast.parse(path.read_text())):
            there = own(target)
            if there in mods and there != name:
                edges[name].add(there)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one package (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def main(repo: Path) -> None:
    mods = modules(repo)
    edges: dict[str, set[str]] = defaultdict(set)
    lines: dict[str, int] = defaultdict(int)
    classes: list[tuple[int, str]] = []
    for name, path in mods.items():
        text = path.read_text()
        tree = ast.parse(text)
        here = package_of(name) or name
        lines[here] += len(text.splitlines())
        for target in imported(tree):
            there = package_of(target)
            if there and there != here:
                edges[here].add(there)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.end_lineno:
                classes.append((node.end_lineno - node.lineno + 1, f"{name}.{node.name}"))
    print("packages (lines):")
    for pkg in sorted(lines):
        print(f"  {pkg:18} {lines[pkg]:6}")
    print("imports (package -> the packages it imports):")
    for pkg in sorted(edges):
        print(f"  {pkg:18} -> {', '.join(sorted(edges[pkg]))}")
    print("cycles:", "; ".join(" <-> ".join(c) for c in cycles(edges)) or "none")
    sizes = sorted(((len(p.read_text().splitlines()), n) for n, p in mods.items()), reverse=True)
    print("largest modules:", ", ".join(f"{n} {size}" for size, n in sizes[:8]))
    print("largest classes:", ", ".join(f"{n} {size}" for size, n in sorted(classes)[::-1][:8]))
    over = [f"{n} {size}" for size, n in sizes if size > LIMIT]
    print(
        f"modules: {len(mods)}, over {LIMIT} lines: {len(over)}",
        *over[:1] and [f"({', '.join(over)})"],
    )
    module_cycles = cycles(module_edges(mods))
    print(
        "module cycles (any import that runs, in a function too):",
        "; ".join(" -> ".join(c) for c in module_cycles) or "none",
    )
    top = sorted(p.name for p in (repo / "secure").glob("*.py"))
    print(f"modules at secure's top: {len(top)} ({', '.join(top)})")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent))
