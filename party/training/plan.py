"""The training schedule every party derives from the spec and the shared seed.

All parties compute the same validation rows, batch order and validation rounds from
(row count, spec), so no indices cross the wire in split mode.
"""

from __future__ import annotations

import math
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

    def round_rows(self, rnd: int) -> np.ndarray:
        """The row positions of training round `rnd` (1-based), as `batches` yields them."""
        epoch, index = divmod(rnd - 1, self.batches_per_epoch)
        order = np.random.default_rng([self.seed, 1, epoch]).permutation(self.train_rows)
        return order[index * self.batch_size : (index + 1) * self.batch_size]

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


CHUNK_BYTES = 1 << 22  # of one message of a chunked scoring (validation): 4 MiB
DEFAULT_EVERY = 20  # rounds between validations, unless the validation rows are many


VALIDATION_COST = {"split": 1 / 16, "blindfl": 3 / 4}  # a validation row / a training row


def validation_every(every: int | None, val_rows: int, batch_size: int, protocol: str) -> int:
    """Rounds between validations: `every` if the spec sets it; else 20, or fewer on large
    tables, so that validation takes at most about a quarter of the training time.
    Validating a row costs `VALIDATION_COST` of training one (measured: split scores the
    validation rows in large chunks, a sixteenth; blindfl's secure forward is most of a
    training step): every 20 rounds, 2e6 validation rows would be scored per 5,120 rows
    trained."""
    if every is not None:
        return every
    cost = VALIDATION_COST.get(protocol, 1.0)
    return max(DEFAULT_EVERY, math.ceil(4 * cost * val_rows / batch_size))


def make_plan(
    rows: int,
    fraction: float,
    batch_size: int,
    epochs: int,
    seed: int,
    every: int | None,
    protocol: str = "split",
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
    every = validation_every(every, n_val, batch_size, protocol)
    return Plan(rows, np.sort(perm[n_val:]), np.sort(perm[:n_val]), batch_size, epochs, seed, every)


def make_test_plan(
    rows: int,
    test_rows: int,
    batch_size: int,
    epochs: int,
    seed: int,
    every: int | None,
    protocol: str = "split",
) -> Plan:
    """Train on every aligned row; validate on all aligned rows of the test dataset."""
    if test_rows < 1:
        raise JobError("the test datasets have no common ids; check the test files' id columns")
    every = validation_every(every, test_rows, batch_size, protocol)
    return Plan(rows, np.arange(rows), np.arange(test_rows), batch_size, epochs, seed, every)


def in_chunks(tag: str, rows: np.ndarray, width: int) -> list[tuple[str, np.ndarray]]:
    """(tag, rows) of each chunk of `rows` whose `width` float32 outputs make one message of
    at most `CHUNK_BYTES` (at least 256 rows): how a large validation set is scored, so no
    message and no copy ever holds all its rows. Every party derives the same chunks."""
    size = max(256, CHUNK_BYTES // (4 * max(1, width)))
    return [(f"{tag}/c{k}", rows[lo : lo + size]) for k, lo in enumerate(range(0, len(rows), size))]
