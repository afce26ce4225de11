"""The passive party's side: encrypted sums per bucket (column, bin) over a row subset.

A bucket's sum is the product modulo n of the ciphertexts of its rows (one product per
row, column and row part, or fewer where two columns are summed through their joint
buckets, `secure.histograms.plan`); an empty bucket is 1, an encryption of 0.
`BucketSummer` shares a tree's row ciphertexts and the party's bin codes with its
executor once, then sums any subset of rows (`sums`: the root's, a node's; `sums_each`: a
level's nodes in one round of tasks) in blocks of rows, one task per block, and
multiplies the tasks' partial sums together. Histogram subtraction (`subtract`, the
larger child as parent minus the smaller: one inversion for all buckets, then four
products each) and cumulative sums per column (`cumulative`, the left sums of each
threshold: one product per bucket) touch no row.

Buckets are ordered column by column, bin by bin: bucket `offsets[j] + b` is bin b of
column j.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import gmpy2
import numpy as np
from gmpy2 import mpz
from vfl.secure.errors import InputError
from vfl.secure.executor.base import OU_PRODUCT, BlockExecutor, Shared
from vfl.secure.histograms.blocks import SumTable, sum_block
from vfl.secure.histograms.layout import Layout
from vfl.secure.histograms.plan import sum_products
from vfl.secure.histograms.rows import EncryptedRows
from vfl.secure.ou.keys import OuPublicKey
from vfl.secure.paillier.blocks import unblob
from vfl.secure.paillier.counters import OpCounts


@dataclass(frozen=True)
class Bins:
    """A party's bin index per row and column (rows x columns, each in [0, counts[j]))
    and the number of bins of each column (bins no row falls in are empty buckets)."""

    codes: np.ndarray
    counts: tuple[int, ...]

    def __post_init__(self) -> None:
        """Raises:
        InputError: codes not a 2-D integer array, counts not one positive integer per
            column, or a code outside its column's bins.
        """
        codes = np.asarray(self.codes)
        counts = tuple(int(c) for c in self.counts)
        if codes.ndim != 2 or not np.issubdtype(codes.dtype, np.integer):
            raise InputError(
                f"bin codes must be a 2-D integer array, got {codes.dtype} {codes.shape}"
            )
        if len(counts) != codes.shape[1] or any(c < 1 for c in counts):
            raise InputError("bins need one count >= 1 per column of codes")
        if codes.size and (codes.min() < 0 or np.any(codes.max(axis=0) >= np.asarray(counts))):
            raise InputError("a bin code lies outside its column's bins [0, count)")
        most = max(counts, default=1)
        dtype = np.dtype(np.uint8 if most <= 256 else np.uint16 if most <= 65_536 else np.uint32)
        object.__setattr__(self, "codes", np.ascontiguousarray(codes, dtype=dtype))
        object.__setattr__(self, "counts", counts)

    @property
    def rows(self) -> int:
        return int(self.codes.shape[0])

    @property
    def total(self) -> int:
        """Buckets over every column."""
        return sum(self.counts)

    @property
    def offsets(self) -> np.ndarray:
        """The first bucket of each column."""
        return np.concatenate([[0], np.cumsum(self.counts)[:-1]]).astype(np.int64)


@dataclass(frozen=True)
class EncryptedBuckets:
    """Encrypted sums of `rows` rows per bucket: `ciphertexts` holds buckets x parts
    values, bucket-major; `counts` the bins of each column."""

    key: OuPublicKey
    layout: Layout
    counts: tuple[int, ...]
    ciphertexts: list[mpz]
    rows: int

    @property
    def total(self) -> int:
        return sum(self.counts)


class BucketSummer:
    """Sums of one tree's encrypted rows per bucket, for any subset of rows."""

    def __init__(
        self,
        rows: EncryptedRows,
        bins: Bins,
        executor: BlockExecutor | None = None,
        counts: OpCounts | None = None,
    ) -> None:
        """Raises:
        InputError: the bins have another number of rows than the ciphertexts.
        """
        if bins.rows != rows.count:
            raise InputError(f"{bins.rows} rows of bins for {rows.count} rows of ciphertexts")
        self.rows, self.bins = rows, bins
        self.executor, self.counts = executor, counts
        self._table = SumTable(rows.data, bins.codes, bins.counts, int(rows.key.n))
        self._shared: Shared[SumTable] | None = None

    def sums(self, select: np.ndarray | Sequence[int] | None = None) -> EncryptedBuckets:
        """The encrypted sum per bucket of the rows at positions `select` (None: all).

        Raises:
            InputError: `select` is not a 1-D array of distinct positions in [0, rows).
        """
        return self.sums_each([select])[0]

    def sums_each(
        self, selects: Sequence[np.ndarray | Sequence[int] | None]
    ) -> list[EncryptedBuckets]:
        """`sums` of several row subsets (a tree level's nodes) in one round of tasks, so
        that nodes too small for two tasks each still use every worker.

        Raises:
            InputError: a selection is not a 1-D array of distinct positions in [0, rows).
        """
        chosen = [_checked(select, self.rows.count) for select in selects]
        executor = self.executor
        owners: list[int] = []  # the selection each block belongs to
        blocks: list[np.ndarray] = []
        for index, rows in enumerate(chosen):
            spans = self._spans(len(rows), len(chosen))
            owners += [index] * len(spans)
            blocks += [rows[lo:hi] for lo, hi in spans]
        if executor is not None and sum(map(len, chosen)) >= 2 * self._rows_per_task(executor):
            results = executor.map(sum_block, self._share(executor), blocks)
        else:
            results = [sum_block(self._table, block) for block in blocks]
        if self.counts is not None:
            products = sum(sum_products(len(block), self.bins.counts) for block in blocks)
            partials = (len(blocks) - len(chosen)) * self.bins.total
            self.counts.add(products=(products + partials) * self.rows.layout.parts)
        return [self._combined(rows, results, owners, index) for index, rows in enumerate(chosen)]

    def _spans(self, rows: int, selections: int) -> list[tuple[int, int]]:
        """How one of `selections` row subsets is cut into tasks: whole when there are as
        many subsets as workers (a block keeps its rows together, and its columns their
        pairs), else into a share of the workers, each of at least a task's worth."""
        executor = self.executor
        if executor is None or selections >= executor.slots:
            return [(0, rows)]
        share = max(1, executor.slots // selections)
        per_task = self._rows_per_task(executor)
        count = max(1, min(share, rows // per_task))
        edges = [rows * i // count for i in range(count + 1)]
        return list(zip(edges[:-1], edges[1:], strict=True))

    def _combined(
        self, rows: np.ndarray, results: list[bytes], owners: list[int], index: int
    ) -> EncryptedBuckets:
        """One selection's sums: the product of its blocks' partial sums."""
        key = self.rows.key
        mine = [
            unblob(result, key.width)
            for result, owner in zip(results, owners, strict=True)
            if owner == index
        ]
        total = mine[0]
        for partial in mine[1:]:
            total = [a * b % key.n for a, b in zip(total, partial, strict=True)]
        return EncryptedBuckets(key, self.rows.layout, self.bins.counts, total, len(rows))

    def _rows_per_task(self, executor: BlockExecutor | None) -> int:
        if executor is None:
            return 1
        per_row = len(self.bins.counts) * self.rows.layout.parts
        return max(1, -(-executor.block_items(OU_PRODUCT, self.rows.key.bits) // per_row))

    def _share(self, executor: BlockExecutor) -> Shared[SumTable]:
        if self._shared is None:
            self._shared = executor.share(self._table)
        return self._shared

    def close(self) -> None:
        """Release what was shared with the executor (local: the shared memory)."""
        self._shared = None


def bucket_sums(
    rows: EncryptedRows,
    bins: Bins,
    select: np.ndarray | Sequence[int] | None = None,
    executor: BlockExecutor | None = None,
) -> EncryptedBuckets:
    """The encrypted sum per bucket of the selected rows (one call; a tree's many nodes
    share one `BucketSummer`).

    Raises:
        InputError: bins of another row count, or a malformed `select`.
    """
    return BucketSummer(rows, bins, executor).sums(select)


def subtract(parent: EncryptedBuckets, child: EncryptedBuckets) -> EncryptedBuckets:
    """The parent's sums minus the child's, bucket by bucket: the other child's sums when
    the child's rows are a subset of the parent's (one inverse and one product each).

    Raises:
        InputError: the two are under other keys, layouts or bins, or the child covers
            more rows than the parent.
    """
    _check_alike(parent, child)
    if child.rows > parent.rows:
        raise InputError(f"the child sums {child.rows} rows, more than its parent's {parent.rows}")
    n = parent.key.n
    inverses = _inverses(child.ciphertexts, n)
    out = [a * b % n for a, b in zip(parent.ciphertexts, inverses, strict=True)]
    return EncryptedBuckets(parent.key, parent.layout, parent.counts, out, parent.rows - child.rows)


def cumulative(buckets: EncryptedBuckets) -> EncryptedBuckets:
    """Per column, the sum of its bins up to each bin (the left side of each threshold)."""
    n, parts = buckets.key.n, buckets.layout.parts
    out = list(buckets.ciphertexts)
    start = 0
    for count in buckets.counts:
        for index in range((start + 1) * parts, (start + count) * parts):
            out[index] = out[index] * out[index - parts] % n
        start += count
    return EncryptedBuckets(buckets.key, buckets.layout, buckets.counts, out, buckets.rows)


def join(parts: Sequence[EncryptedBuckets]) -> EncryptedBuckets:
    """Several bucket sums as one list, bucket after bucket (a level's nodes, packed into
    one message); their columns' bins side by side, `rows` the most any of them sums.

    Raises:
        InputError: none given, or sums under other keys or layouts.
    """
    if not parts:
        raise InputError("join needs at least one set of bucket sums")
    first = parts[0]
    if any(p.key != first.key or p.layout != first.layout for p in parts[1:]):
        raise InputError("these bucket sums are under other keys or layouts")
    counts = tuple(c for p in parts for c in p.counts)
    cts = [c for p in parts for c in p.ciphertexts]
    return EncryptedBuckets(first.key, first.layout, counts, cts, max(p.rows for p in parts))


def _checked(select: np.ndarray | Sequence[int] | None, rows: int) -> np.ndarray:
    if select is None:
        return np.arange(rows, dtype=np.int64)
    chosen = np.asarray(select)
    if chosen.ndim != 1 or (chosen.size and not np.issubdtype(chosen.dtype, np.integer)):
        raise InputError("select must be a 1-D array of row positions")
    chosen = chosen.astype(np.int64)
    if chosen.size and (chosen.min() < 0 or chosen.max() >= rows):
        raise InputError(f"a selected row lies outside [0, {rows})")
    if np.unique(chosen).size != chosen.size:
        raise InputError("select repeats a row: each row may be summed once")
    return chosen


def _check_alike(a: EncryptedBuckets, b: EncryptedBuckets) -> None:
    if a.key != b.key or a.layout != b.layout or a.counts != b.counts:
        raise InputError("these bucket sums are under other keys, layouts or bins")


def _inverses(values: list[mpz], n: mpz) -> list[mpz]:
    """Every value's inverse mod n with one modular inversion (Montgomery's trick: three
    products each instead of an inversion each, ~4x cheaper at 2048 bits).

    Raises:
        InputError: a value is not a unit mod n.
    """
    if not values:
        return []
    prefix = [values[0]]
    for value in values[1:]:
        prefix.append(prefix[-1] * value % n)
    try:
        inverse: mpz = gmpy2.invert(prefix[-1], n)
    except ZeroDivisionError:
        raise InputError("a bucket ciphertext is not a unit mod n: it is corrupt") from None
    out = [inverse] * len(values)
    for index in range(len(values) - 1, 0, -1):
        out[index] = inverse * prefix[index - 1] % n
        inverse = inverse * values[index] % n
    out[0] = inverse
    return out
