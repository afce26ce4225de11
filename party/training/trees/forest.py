"""The trees as the active party holds them: structure, leaf values and, at each split,
who owns it (0: the active party; 1.. the passive parties in the spec's order) and its
split id there. No party but the owner knows a split's column or threshold; the active
party walks the trees with every owner's decisions (`Decisions`: which rows go left at
each of its splits).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

LEAF = -1


@dataclass
class Tree:
    """One tree, nodes in the order they were made (0: the root); a leaf has `left` -1."""

    left: list[int] = field(default_factory=lambda: [LEAF])
    right: list[int] = field(default_factory=lambda: [LEAF])
    owner: list[int] = field(default_factory=lambda: [LEAF])
    split: list[int] = field(default_factory=lambda: [LEAF])
    value: list[float] = field(default_factory=lambda: [0.0])
    gain: list[float] = field(default_factory=lambda: [0.0])

    def divide(self, node: int, owner: int, split: int, gain: float) -> tuple[int, int]:
        """Make `node` a split of `owner`'s split `split`; returns its two children."""
        kids = (len(self.left), len(self.left) + 1)
        for _ in kids:
            for values, blank in self._columns():
                values.append(blank)
        self.left[node], self.right[node] = kids
        self.owner[node], self.split[node], self.gain[node] = owner, split, gain
        return kids

    def _columns(self) -> tuple[tuple[list, object], ...]:
        return (
            (self.left, LEAF),
            (self.right, LEAF),
            (self.owner, LEAF),
            (self.split, LEAF),
            (self.value, 0.0),
            (self.gain, 0.0),
        )

    def state(self) -> dict[str, np.ndarray]:
        return {
            "left": np.asarray(self.left, dtype=np.int64),
            "right": np.asarray(self.right, dtype=np.int64),
            "owner": np.asarray(self.owner, dtype=np.int64),
            "split": np.asarray(self.split, dtype=np.int64),
            "value": np.asarray(self.value, dtype=np.float64),
            "gain": np.asarray(self.gain, dtype=np.float64),
        }

    @classmethod
    def from_state(cls, state: dict[str, np.ndarray]) -> Tree:
        def ints(key: str) -> list[int]:
            return [int(v) for v in state[key]]

        def floats(key: str) -> list[float]:
            return [float(v) for v in state[key]]

        return cls(
            ints("left"),
            ints("right"),
            ints("owner"),
            ints("split"),
            floats("value"),
            floats("gain"),
        )

    def leaves(self, decisions: Decisions, rows: int) -> np.ndarray:
        """The leaf each of `rows` rows reaches."""
        left, right = np.asarray(self.left), np.asarray(self.right)
        owner, split = np.asarray(self.owner), np.asarray(self.split)
        node = np.zeros(rows, dtype=np.int64)
        while True:
            at = np.flatnonzero(left[node] != LEAF)
            if not len(at):
                return node
            here = node[at]
            go = decisions.left(owner[here], split[here], at)
            node[at] = np.where(go, left[here], right[here])

    def splits(self) -> list[tuple[int, int, float]]:
        """(owner, split id, gain) of every split node."""
        return [
            (o, s, g)
            for o, s, g, lf in zip(self.owner, self.split, self.gain, self.left, strict=True)
            if lf != LEAF
        ]


class Decisions:
    """Which rows go left at the splits of each owner: per owner, a bool matrix of its
    splits `first`, `first + 1`, ... (rows of the matrix) by the rows being scored."""

    def __init__(self) -> None:
        self.by_owner: dict[int, tuple[int, np.ndarray]] = {}

    def add(self, owner: int, matrix: np.ndarray, first: int = 0) -> None:
        self.by_owner[owner] = (first, matrix)

    def left(self, owners: np.ndarray, splits: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Whether row `rows[i]` goes left at split `splits[i]` of `owners[i]`.

        Raises:
            KeyError: an owner without decisions. IndexError: a split outside them.
        """
        out = np.zeros(len(rows), dtype=bool)
        for owner in np.unique(owners):
            first, matrix = self.by_owner[int(owner)]
            at = owners == owner
            out[at] = matrix[splits[at] - first, rows[at]]
        return out


CHUNK_ROWS = 16_384  # rows walked at once (their nodes: rows x trees int64)


@dataclass(frozen=True)
class _Flat:
    """Trees laid end to end for walking them all at once: per node its children (flat
    indexes), owner, split id and value; per tree its root and class."""

    key: tuple
    left: np.ndarray
    right: np.ndarray
    owner: np.ndarray
    split: np.ndarray
    value: np.ndarray
    roots: np.ndarray
    classes: np.ndarray
    depth: int

    @classmethod
    def of(cls, key: tuple, trees: list[tuple[int, Tree]]) -> _Flat:
        states = [tree.state() for _, tree in trees]
        sizes = [len(state["left"]) for state in states]
        roots = np.cumsum([0, *sizes])[:-1].astype(np.int64)
        children = {}
        for side in ("left", "right"):  # flat indexes: each tree's shifted by its root
            shifted = zip(states, roots, strict=True)
            kids = [np.where(st[side] != LEAF, st[side] + r, LEAF) for st, r in shifted]
            children[side] = np.concatenate(kids)
        return cls(
            key,
            children["left"],
            children["right"],
            np.concatenate([st["owner"] for st in states]),
            np.concatenate([st["split"] for st in states]),
            np.concatenate([st["value"] for st in states]),
            roots,
            np.asarray([k for k, _ in trees], dtype=np.int64),
            max(_depth(st["left"], st["right"]) for st in states),
        )


def _depth(left: np.ndarray, right: np.ndarray) -> int:
    """The number of splits on a tree's longest path."""
    level, depth = np.zeros(1, dtype=np.int64), 0
    while True:
        level = level[left[level] != LEAF]
        if not len(level):
            return depth
        level, depth = np.concatenate([left[level], right[level]]), depth + 1


@dataclass
class Forest:
    """A round after round list of trees (K a round: one per class) and the margins'
    start: margin = start + the sum of every tree's leaf value."""

    start: np.ndarray
    rounds: list[list[Tree]] = field(default_factory=list)
    _flat: _Flat | None = field(default=None, repr=False, compare=False)

    @property
    def k(self) -> int:
        return len(self.start)

    def margins(self, decisions: Decisions, rows: int, rounds: range | None = None) -> np.ndarray:
        """rows x K margins of `rows` rows (`rounds`: of those rounds only, no start):
        every tree walked at once, a level a step.

        Raises:
            KeyError: an owner without decisions. IndexError: a split outside them.
        """
        out = np.zeros((rows, self.k)) if rounds is not None else np.tile(self.start, (rows, 1))
        chosen = range(len(self.rounds)) if rounds is None else rounds
        trees = [(k, t) for r in chosen for k, t in enumerate(self.rounds[r])]
        if not trees or not rows:
            return out
        flat = self._flattened(trees)
        matrix, where = _stacked(decisions, flat, rows)
        for lo in range(0, rows, CHUNK_ROWS):
            hi = min(rows, lo + CHUNK_ROWS)
            node = np.tile(flat.roots, (hi - lo, 1))
            cols = np.arange(lo, hi)[:, None]
            for _ in range(flat.depth):
                inner = flat.left[node] != LEAF
                go = matrix[np.where(inner, where[node], 0), cols]
                node = np.where(inner, np.where(go, flat.left[node], flat.right[node]), node)
            values = flat.value[node]
            for k in range(self.k):
                out[lo:hi, k] += values[:, flat.classes == k].sum(axis=1)
        return out

    def _flattened(self, trees: list[tuple[int, Tree]]) -> _Flat:
        key = tuple((id(t), len(t.left)) for _, t in trees)
        if self._flat is None or self._flat.key != key:
            self._flat = _Flat.of(key, trees)
        return self._flat

    def state(self) -> dict:
        return {
            "start": np.asarray(self.start, dtype=np.float64),
            "rounds": [[t.state() for t in trees] for trees in self.rounds],
        }

    @classmethod
    def from_state(cls, state: dict) -> Forest:
        rounds = [[Tree.from_state(t) for t in trees] for trees in state["rounds"]]
        return cls(np.asarray(state["start"], dtype=np.float64), rounds)


def _stacked(decisions: Decisions, flat: _Flat, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Every owner's decisions in one matrix (splits x rows) and, per node of `flat`,
    its split's row there (0 at a leaf)."""
    where = np.zeros(len(flat.owner), dtype=np.int64)
    inner = flat.left != LEAF
    blocks, at = [], 0
    for owner in np.unique(flat.owner[inner]):
        first, matrix = decisions.by_owner[int(owner)]
        mine = inner & (flat.owner == owner)
        local = flat.split[mine] - first
        if local.min() < 0 or local.max() >= len(matrix):
            raise IndexError(f"a split of owner {int(owner)} outside its decisions")
        where[mine] = local + at
        blocks.append(matrix)
        at += len(matrix)
    return (np.concatenate(blocks) if blocks else np.zeros((1, rows), dtype=bool)), where
