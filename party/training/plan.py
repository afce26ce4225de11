"""The training schedule every party derives from the spec and the shared seed.

All parties compute the same validation rows, batch order and validation rounds from
(row count, spec), so no indices cross the wire in split mode.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from vfl.party.errors import JobError


@dataclass(frozen=True)
class Plan:
    rows: int
    train_rows: np.ndarray  # positions into the aligned training rows
    val_rows: np.ndarray  # positions into the validation inputs (held-out or test rows)
    batch_size: int
    epochs: int
    seed: int
    every: int

    @property
    def batches_per_epoch(self) -> int:
        return -(-len(self.train_rows) // self.batch_size)

    @property
    def total_rounds(self) -> int:
        return self.batches_per_epoch * self.epochs

    def batches(self) -> Iterator[tuple[int, int, np.ndarray]]:
        """Yield (round, epoch, row positions) for every training batch, 1-based rounds."""
        rnd = 0
        for epoch in range(self.epochs):
            order = np.random.default_rng([self.seed, 1, epoch]).permutation(self.train_rows)
            for start in range(0, len(order), self.batch_size):
                rnd += 1
                yield rnd, epoch, order[start : start + self.batch_size]

    def validates_at(self, rnd: int) -> bool:
        return rnd % self.every == 0 or rnd == self.total_rounds

    @property
    def validations(self) -> int:
        """How many times the validation rows are scored."""
        return self.total_rounds // self.every + (1 if self.total_rounds % self.every else 0)

    def uses(self, name: str) -> int:
        """How many times each row of set `name` ("train" or "val") goes forward."""
        return self.epochs if name == "train" else self.validations

    def rows_of(self, name: str) -> np.ndarray:
        return self.train_rows if name == "train" else self.val_rows


def make_plan(
    rows: int, fraction: float, batch_size: int, epochs: int, seed: int, every: int
) -> Plan:
    """Split the aligned rows into training and validation positions.

    Raises:
        JobError: too few rows for the validation fraction.
    """
    n_val = int(round(rows * fraction))
    if n_val < 1 or rows - n_val < 1:
        raise JobError(
            f"{rows} aligned rows cannot be split with validation.fraction={fraction}; "
            "use more rows or another fraction"
        )
    perm = np.random.default_rng([seed, 0]).permutation(rows)
    return Plan(rows, np.sort(perm[n_val:]), np.sort(perm[:n_val]), batch_size, epochs, seed, every)


def make_test_plan(
    rows: int, test_rows: int, batch_size: int, epochs: int, seed: int, every: int
) -> Plan:
    """Train on every aligned row; validate on all aligned rows of the test dataset."""
    if test_rows < 1:
        raise JobError("the test datasets have no common ids; check the test files' id columns")
    return Plan(rows, np.arange(rows), np.arange(test_rows), batch_size, epochs, seed, every)
