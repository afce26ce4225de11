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


@dataclass
class Forest:
    """A round after round list of trees (K a round: one per class) and the margins'
    start: margin = start + the sum of every tree's leaf value."""

    start: np.ndarray
    rounds: list[list[Tree]] = field(default_factory=list)

    @property
    def k(self) -> int:
        return len(self.start)

    def margins(self, decisions: Decisions, rows: int, rounds: range | None = None) -> np.ndarray:
        """rows x K margins of `rows` rows (`rounds`: of those rounds only, no start)."""
        out = np.zeros((rows, self.k)) if rounds is not None else np.tile(self.start, (rows, 1))
        for r in rounds if rounds is not None else range(len(self.rounds)):
            for k, tree in enumerate(self.rounds[r]):
                out[:, k] += np.asarray(tree.value)[tree.leaves(decisions, rows)]
        return out

    def state(self) -> dict:
        return {
            "start": np.asarray(self.start, dtype=np.float64),
            "rounds": [[t.state() for t in trees] for trees in self.rounds],
        }

    @classmethod
    def from_state(cls, state: dict) -> Forest:
        rounds = [[Tree.from_state(t) for t in trees] for trees in state["rounds"]]
        return cls(np.asarray(state["start"], dtype=np.float64), rounds)
