"""The executor seam: `BlockExecutor`, `Shared`, and the cost model of its tasks.

How a caller uses it, and the two engines behind it, are in `secure.executor`. This
module is what the Paillier engine, ciphertext products and PSI import: the interface
and the cost model only, no engine (`secure.executor.local`, `secure.executor.ray_cluster`).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:  # pool_cache -> keys -> config -> this module
    from vfl.secure.paillier.pool_cache import PoolCache

S = TypeVar("S")  # what a task shares with every block (a key, a table)
B = TypeVar("B")  # a block of work
R = TypeVar("R")  # a block's result


# Operations a task can do, and one-core milliseconds per item at 2048 bits
# (bench/results/scale_out.txt: decryption 2.71 ms, full r^n 9.46 ms, a product mod n^2
# 6 us with ~3 per nonzero 8-bit term; a worker's table sample times a ciphertext, 276
# products read from the shared array, 1.62 ms against the pool's own 1.44 ms in one
# run; an X25519 blinding 32 us, secure.psi.curve) and the power of key_bits / 2048 each
# scales with (exponent length x product cost).
DECRYPT = "decrypt"  # one ciphertext decrypted by CRT
PRODUCT_TERM = "product term"  # one nonzero term of a ciphertext matrix product
RERANDOMIZE_FULL = "rerandomize (full)"  # c * r^n with a full exponentiation
RERANDOMIZE_TABLE = "rerandomize (table)"  # c * r^n from a fixed-base table
PSI_POINT = "psi point"  # one X25519 blinding of a PSI id (secure.psi.curve; no key size)
# Okamoto-Uchiyama (secure.ou, the encrypted bucket sums of secure.histograms; key_bits is
# the size of n = p^2 q; bench/results/bucket_sum.txt):
OU_ENCRYPT = "ou encrypt"  # the owner's encryption of one row part by its CRT tables
OU_PRODUCT = "ou product"  # one product or squaring mod n (a bucket addition, a pack shift)
OU_DECRYPT = "ou decrypt"  # one decryption, c^t mod p^2
OP_COSTS_MS = {
    DECRYPT: 2.7,
    PRODUCT_TERM: 0.018,
    RERANDOMIZE_FULL: 9.5,
    RERANDOMIZE_TABLE: 1.6,
    PSI_POINT: 0.032,
    OU_ENCRYPT: 0.16,
    OU_PRODUCT: 0.0015,
    OU_DECRYPT: 0.2,
}
_COST_POWERS = {
    DECRYPT: 3,
    PRODUCT_TERM: 2,
    RERANDOMIZE_FULL: 3,
    RERANDOMIZE_TABLE: 3,
    PSI_POINT: 0,
    OU_ENCRYPT: 3,
    OU_PRODUCT: 2,
    OU_DECRYPT: 3,
}


def op_cost_ms(op: str, key_bits: int = 2048) -> float:
    """Estimated one-core milliseconds of one item of `op` under a `key_bits` Paillier
    key (PSI points do not depend on it)."""
    return OP_COSTS_MS[op] * (key_bits / 2048) ** _COST_POWERS[op]


class Shared(Generic[S]):
    """A value sent to the executor's workers once: the value itself (local) or its
    object-store reference (ray)."""

    def __init__(self, value: Any) -> None:
        self.value = value


class BlockExecutor(ABC):
    """The seam: `share` a value once, `map` a task function over blocks."""

    name = "base"

    # whether decryptions and re-randomisations leave the daemon (`Paillier`); products
    # and PSI blindings always go to the executor when large enough
    spreads_paillier = True

    def __init__(self, min_task_ms: float) -> None:
        self.min_task_ms = min_task_ms
        self.tasks = 0  # tasks mapped so far (in-process ones included)
        # the party's obfuscator pools for peers' keys, kept across jobs like the workers
        # (`secure.paillier.pool_cache`; set by the party daemon, None: per-job pools)
        self.pools: PoolCache | None = None

    @property
    @abstractmethod
    def slots(self) -> int:
        """How many tasks run at once."""

    def connect(self) -> None:  # noqa: B027 - a no-op unless an engine needs it
        """Make sure the engine can run tasks (a no-op for local).

        Raises:
            ExecutorError: the engine is not installed or its cluster is unreachable.
        """

    @abstractmethod
    def share(self, value: S) -> Shared[S]:
        """Send `value` to the workers once; pass the handle to `map`."""

    @abstractmethod
    def map(self, fn: Callable[[S, B], R], shared: Shared[S], blocks: Sequence[B]) -> list[R]:
        """[fn(value, block) for block in blocks], spread over the workers."""

    @abstractmethod
    def start(self, fn: Callable[[S, B], R], shared: Shared[S], block: B) -> Future[R]:
        """Start one task, fn(value, block), without waiting (a stream of blocks: PSI)."""

    def block_items(self, op: str, key_bits: int = 2048) -> int:
        """The fewest items of `op` (one of `OP_COSTS_MS`) one task gets under a
        `key_bits` Paillier key: `min_task_ms` of work by the cost model."""
        return max(1, math.ceil(self.min_task_ms / op_cost_ms(op, key_bits)))

    def split(self, items: int, min_items: int) -> list[tuple[int, int]]:
        """[lo, hi) ranges cutting `items` into at most `slots` blocks of at least
        `min_items` items each."""
        count = max(1, min(self.slots, items // max(1, min_items)))
        edges = [items * i // count for i in range(count + 1)]
        return list(zip(edges[:-1], edges[1:], strict=True))

    def close(self) -> None:  # noqa: B027 - a no-op unless an engine needs it
        """Release the workers (local) or leave the cluster (ray)."""
