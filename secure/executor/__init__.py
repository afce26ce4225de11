"""Where one party's heavy homomorphic work runs: the executor seam.

Decryptions, packed ciphertext-matrix products, re-randomisations and PSI blindings are
independent by row block. The secure layer never runs them itself: it asks the party's
`BlockExecutor` to share a value once (a private key, a modulus, an obfuscator table, a
PSI scalar) and to map a task function of `secure.paillier.blocks` (or
`secure.psi.curve.blind_blob`) over blocks, and gets the results back in order, as
bytes (`start` runs one task without waiting, for PSI's point stream):

    shared = executor.share(private_key)                   # once per job
    spans = executor.split(len(cts), executor.block_items(DECRYPT, key_bits))
    blobs = [blob(cts[lo:hi], width) for lo, hi in spans]
    results = executor.map(decrypt_block, shared, blobs)   # one task per block

How much work one task gets: `compute.min_task_ms`, one number for every operation,
turned into items per task by a cost model (`OP_COSTS_MS`, one-core milliseconds per
item at 2048 bits, measured by bench/scale_out.py, scaled with the key size): the same
setting (20 ms) gives a decryption task 8 ciphertexts and a product task 1,112 nonzero terms,
so a training batch's few hundred decryptions reach a cluster with many CPUs while small
products stay in one task. Callers keep work under two tasks' worth in their own process.

Two engines, chosen by the party config's `compute:` section (`ComputeConfig`), never by
a job spec, because the machines belong to the party:

- `local` (the default, `secure.executor.local`): a process pool over this machine's
  cores ("spawn" processes, started at the first parallel map); a single block runs
  in-process. A large shared array (an obfuscator table) goes into shared memory once
  instead of into every task.
- `ray` (`secure.executor.ray_cluster`): the party's own Ray cluster, which the daemon joins as
  a driver at the first job (`connect()`: an unreachable cluster fails that job before
  training starts). `share` puts the value into the cluster's object store once
  (`ray.put`); every task gets the reference, so key material and tables cross to each
  node once per job, never per task. Tasks are retried by Ray when a worker process dies
  (`max_retries`). Ray is an optional extra (`pip install -e ".[ray]"`), imported only
  when a config asks for it.

This module holds the `compute:` settings (`ComputeConfig`) and `make_executor`, and
re-exports the seam (`secure.executor.base`: `BlockExecutor`, `Shared`, the cost model)
and both engines, so that a caller imports all of it from here.

Only the party's own values and the functions' own byte blobs cross to workers; nothing
received from a peer is unpickled. A party's private key reaches only its own cluster
(docs/security.md, Executors). Cross-party traffic stays on the daemons' gRPC.
"""

from __future__ import annotations

from dataclasses import dataclass

from vfl.secure.errors import ConfigError
from vfl.secure.executor.base import (
    DECRYPT,
    OP_COSTS_MS,
    OU_DECRYPT,
    OU_ENCRYPT,
    OU_PRODUCT,
    PRODUCT_TERM,
    PSI_POINT,
    RERANDOMIZE_FULL,
    RERANDOMIZE_TABLE,
    BlockExecutor,
    Shared,
    op_cost_ms,
)
from vfl.secure.executor.local import LocalExecutor
from vfl.secure.executor.ray_cluster import RAY_INSTALL, RayExecutor, import_ray

__all__ = [
    "DECRYPT",
    "EXECUTORS",
    "OP_COSTS_MS",
    "OU_DECRYPT",
    "OU_ENCRYPT",
    "OU_PRODUCT",
    "PRODUCT_TERM",
    "PSI_POINT",
    "RAY_INSTALL",
    "RERANDOMIZE_FULL",
    "RERANDOMIZE_TABLE",
    "BlockExecutor",
    "ComputeConfig",
    "LocalExecutor",
    "RayExecutor",
    "Shared",
    "make_executor",
    "op_cost_ms",
]

EXECUTORS = ("local", "ray")
MAX_TASK_MS = 60_000.0  # a minute: more would keep a whole job in one task


@dataclass(frozen=True)
class ComputeConfig:
    """A party's compute: the party config's `compute:` section.

    Attributes:
        executor: "local" (this machine's cores) or "ray" (the party's Ray cluster).
        address: ray only: HOST:PORT of the cluster's head (`ray start --head --port`).
        min_task_ms: the least work, in one-core milliseconds, one task gets (the same
            for every operation: `BlockExecutor.block_items` turns it into ciphertexts
            per decryption or re-randomisation task and nonzero terms per product task);
            smaller work stays in one task. 20 ms keeps Ray's ~1.75 ms per task near 10%
            of the work (bench/scale_out.py).
        workers: local only: processes (None: all cores; 1: everything in-process).
        max_retries: ray only: times a task is rerun when its worker process dies.
        kept_keys: peers' keys whose obfuscator pools the daemon keeps across jobs
            (`secure.paillier.pool_cache`; ~36 MB of tables each at 2048 bits; 0: none).
        kept_obfuscators: obfuscators each kept pool fills up to while the daemon idles
            (512 bytes each at 2048 bits; one per ciphertext sent to the key's owner).
    """

    executor: str = "local"
    address: str | None = None
    min_task_ms: float = 20.0
    workers: int | None = None
    max_retries: int = 3
    kept_keys: int = 4
    kept_obfuscators: int = 4_096

    def __post_init__(self) -> None:
        """Raises:
        ConfigError: an unknown executor, ray without an address, a bound out of range.
        """
        checks = [
            (self.executor in EXECUTORS, f"compute.executor must be one of {EXECUTORS}"),
            (
                self.executor != "ray" or bool(self.address),
                "compute.executor 'ray' needs compute.address: HOST:PORT of the cluster head",
            ),
            (
                isinstance(self.min_task_ms, int | float)
                and not isinstance(self.min_task_ms, bool)
                and 0 < self.min_task_ms <= MAX_TASK_MS,
                f"compute.min_task_ms must be a number of milliseconds in (0, {MAX_TASK_MS}]",
            ),
            (self.workers is None or self.workers >= 1, "compute.workers must be >= 1"),
            (self.max_retries >= 0, "compute.max_retries must be >= 0"),
            (self.kept_keys >= 0, "compute.kept_keys must be >= 0"),
            (self.kept_obfuscators >= 0, "compute.kept_obfuscators must be >= 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)


def make_executor(config: ComputeConfig) -> BlockExecutor:
    """The executor a party config's `compute:` names (not connected yet).

    Raises:
        ExecutorError: "ray" without Ray installed.
    """
    if config.executor == "ray":
        import_ray()
        assert config.address is not None  # ComputeConfig checked it
        return RayExecutor(config.address, config.min_task_ms, config.max_retries)
    return LocalExecutor(config.workers, config.min_task_ms)
