"""The forest walks every tree at once (`Forest.margins`): checked against a plain walk
of one row through one tree at a time, on random trees of 1 and 3 classes over three
owners' decisions."""

from __future__ import annotations

import numpy as np
import pytest
from vfl.party.training.trees.forest import LEAF, Decisions, Forest, Tree


def random_forest(seed: int, classes: int, rounds: int, owners: int, first: int):
    rng = np.random.default_rng(seed)
    made = [first] * owners
    forest = Forest(np.arange(classes) * 0.5, [])
    for _ in range(rounds):
        trees = []
        for _ in range(classes):
            tree, frontier = Tree(), [0]
            for _ in range(int(rng.integers(0, 6))):
                grown = []
                for node in frontier:
                    if rng.random() < 0.3:
                        continue  # stays a leaf: trees of uneven depth
                    owner = int(rng.integers(owners))
                    grown += tree.divide(node, owner, made[owner], 1.0)
                    made[owner] += 1
                frontier = grown
            tree.value = rng.normal(size=len(tree.value)).tolist()
            trees.append(tree)
        forest.rounds.append(trees)
    return forest, made


def walked(forest: Forest, matrices: list[np.ndarray], first: int, row: int, rounds) -> list:
    out = [0.0] * forest.k if rounds is not None else list(forest.start)
    for r in rounds if rounds is not None else range(len(forest.rounds)):
        for k, tree in enumerate(forest.rounds[r]):
            node = 0
            while tree.left[node] != LEAF:
                go = matrices[tree.owner[node]][tree.split[node] - first, row]
                node = tree.left[node] if go else tree.right[node]
            out[k] += tree.value[node]
    return out


@pytest.mark.parametrize("seed", range(6))
def test_margins_equal_a_walk_of_each_row_through_each_tree(seed: int) -> None:
    classes, rows, first = (1, 3)[seed % 2], (1, 9, 20_000)[seed % 3], 4
    forest, made = random_forest(seed, classes, 12, 3, first)
    rng = np.random.default_rng(seed + 100)
    matrices = [rng.random((m - first, rows)) < 0.5 for m in made]
    decisions = Decisions()
    for owner, matrix in enumerate(matrices):
        decisions.add(owner, matrix, first)
    for rounds in (None, range(3, 4), range(12)):
        got = forest.margins(decisions, rows, rounds)
        assert got.shape == (rows, classes)
        for row in sorted({0, rows // 2, rows - 1}):
            want = walked(forest, matrices, first, row, rounds)
            np.testing.assert_allclose(got[row], want, rtol=0, atol=1e-12)
    forest.rounds = forest.rounds[:5]  # early stopping keeps fewer rounds: walked afresh
    np.testing.assert_allclose(
        forest.margins(decisions, rows)[0], walked(forest, matrices, first, 0, None), atol=1e-12
    )


def test_an_owner_without_decisions_or_a_split_outside_them_is_an_error() -> None:
    forest, made = random_forest(1, 1, 4, 2, 0)
    decisions = Decisions()
    decisions.add(0, np.zeros((made[0], 2), dtype=bool))
    with pytest.raises(KeyError):
        forest.margins(decisions, 2)
    decisions.add(1, np.zeros((made[1] - 1, 2), dtype=bool))
    with pytest.raises(IndexError):
        forest.margins(decisions, 2)


def test_a_forest_without_trees_gives_its_start() -> None:
    forest = Forest(np.array([0.25, -0.5]))
    np.testing.assert_array_equal(forest.margins(Decisions(), 3), [[0.25, -0.5]] * 3)
    np.testing.assert_array_equal(forest.margins(Decisions(), 2, range(0)), np.zeros((2, 2)))
