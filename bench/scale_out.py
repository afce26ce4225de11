"""Scale-out of a party's Paillier work: the executor's engines side by side.

    python -m bench.scale_out                   2048-bit key, writes bench/results/scale_out.txt
    python -m bench.scale_out --key-bits 1024 --items 128

Measures, per engine, the throughput of the three task functions of
`secure.paillier.blocks` (what `secure.executor` maps over row blocks):
decryptions, re-randomisations (a full r^n each: workers keep no table) and packed
products (the multi-exponentiation kernel on an X^T [[G]]-shaped block, counted in
products mod n^2), on
  - 1 process (the functions called in-process),
  - 2 local processes (`LocalExecutor(2)`, "spawn" pool),
  - a Ray cluster of one head and one worker node (`ray start --head` and `ray start
    --address`, one CPU each, separate processes on this machine: tests/support/ray_cluster.py),
then Ray's per-task overhead o (the wall time of many empty tasks x slots / tasks), the
block size b_10 = 10 o / t from which it is under 10% of a task's work t per item, and
a projection of a credit-shaped secure epoch and a 1e6-row prediction on C cores:

    T(C) = sum over ops of N_op x (t_op + o / b_op) / C

with N_op the operations the MatMul layer needs (bench/floor.py's counts), t_op the
one-core seconds per operation measured here and b_op = max(b_10, --min-task-ms / t_op)
(the daemon's blocks: `compute.min_task_ms` through the executor's cost model). It is
the work's floor: the protocol's round trips, the parties' serial steps and the PSI are
not in it. The re-randomisations and fresh encryptions are counted as cluster tasks of
full r^n: an upper bound, since the daemon sends only what its pools fall short of, as
samples of the pool's fixed-base table (`rerandomize_table_block`, ~1/6 of a full r^n),
and makes its fresh encryptions in its own pools (bench/README.md, Scale-out). Run it only on
an otherwise idle machine; it notes the load average.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from vfl.secure.config import SecureConfig
from vfl.secure.executor import BlockExecutor, LocalExecutor, RayExecutor
from vfl.secure.paillier.blocks import (
    MultiexpBlock,
    blob,
    decrypt_block,
    multiexp_block,
    rerandomize_block,
    width_of,
)
from vfl.secure.paillier.engine import Paillier
from vfl.secure.paillier.keys import generate_keypair
from vfl.secure.paillier.multiexp import product_count

from bench.credit_data import credit_arrays
from bench.floor import Counts, MatmulCounter
from tests.support.ray_cluster import LocalRayCluster, ray_missing

ROOT = Path(__file__).resolve().parent.parent

CORES = (16, 64, 256)
EMPTY_TASKS = 200
BATCH = 256  # bench/secure_epoch.py's


def product_blocks(cts, nsq, parts: int, rng) -> tuple[list[MultiexpBlock], float]:
    """X^T [[G]]: 13 outputs (features) x len(cts) bases (rows), 8-bit signed exponents,
    cut into `parts` blocks of bases; and their products mod n^2 by the cost model."""
    exps = sp.csc_matrix(rng.integers(-255, 256, size=(13, len(cts))).astype(np.int64))
    width, m = width_of(nsq), len(cts)
    edges = [m * i // parts for i in range(parts + 1)]
    blocks = []
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        start, stop = int(exps.indptr[lo]), int(exps.indptr[hi])
        indptr = exps.indptr[lo : hi + 1] - start
        blocks.append(
            (blob(cts[lo:hi], width), indptr, exps.indices[start:stop], exps.data[start:stop], 13)
        )
    return blocks, float(product_count(exps.indptr, exps.indices, exps.data))


def throughput(executor: BlockExecutor | None, fn, shared, blocks, items: float) -> float:
    """Items per second of one map of `fn` over `blocks` (best of two; in-process
    without an executor)."""
    best = math.inf
    for _ in range(2):
        begun = time.perf_counter()
        if executor is None:
            for block in blocks:
                fn(shared, block)
        else:
            executor.map(fn, executor.share(shared), blocks)
        best = min(best, time.perf_counter() - begun)
    return items / best


def task_overhead(executor: BlockExecutor, sk) -> float:
    """Seconds one empty task costs a slot: wall time of many x slots / tasks."""
    shared = executor.share(sk)
    executor.map(decrypt_block, shared, [b""] * executor.slots)  # warm
    begun = time.perf_counter()
    executor.map(decrypt_block, shared, [b""] * EMPTY_TASKS)
    return (time.perf_counter() - begun) * executor.slots / EMPTY_TASKS


def measure(args) -> tuple[dict[str, dict[str, float]], dict[str, float], dict[str, float]]:
    config = SecureConfig(key_bits=args.key_bits, allow_insecure_test_keys=args.key_bits < 2048)
    keys = generate_keypair("bench", config)
    he = Paillier(keys.public, keys.private)
    n_items = args.items
    cts = he.encrypt(list(range(n_items)))
    nsq, width = keys.public.nsquare, width_of(keys.public.nsquare)
    rng = np.random.default_rng(0)

    def ops(parts: int):
        edges = [n_items * i // parts for i in range(parts + 1)]
        halves = [blob(cts[lo:hi], width) for lo, hi in zip(edges[:-1], edges[1:], strict=True)]
        products, count = product_blocks(cts, nsq, parts, rng)
        return {
            "decrypt": (decrypt_block, keys.private, halves, n_items),
            "rerandomize": (rerandomize_block, keys.public, halves, n_items),
            "product": (multiexp_block, nsq, products, count),
        }

    table: dict[str, dict[str, float]] = {}
    one = ops(1)
    table["1 process"] = {k: throughput(None, *v) for k, v in one.items()}
    print("1 process", table["1 process"], flush=True)
    local = LocalExecutor(2)
    local.warm_up()
    two = ops(2)
    table["2 local processes"] = {k: throughput(local, *v) for k, v in two.items()}
    overhead = {"2 local processes": task_overhead(local, keys.private)}
    local.close()
    print("2 local processes", table["2 local processes"], flush=True)
    missing = ray_missing()
    if missing is None:
        cluster = LocalRayCluster(workers=1)
        try:
            executor = RayExecutor(cluster.start())  # blocks are cut here, not by it
            executor.connect()
            name = f"Ray: head + 1 worker node ({executor.slots} CPUs)"
            executor.map(decrypt_block, executor.share(keys.private), two["decrypt"][2])  # warm
            table[name] = {k: throughput(executor, *v) for k, v in two.items()}
            overhead["Ray"] = task_overhead(executor, keys.private)
            print(name, table[name], flush=True)
            executor.close()
        finally:
            cluster.stop()
    else:
        print(f"no Ray cluster: {missing}", flush=True)
    per_item = {k: 1 / v for k, v in table["1 process"].items()}  # one-core seconds
    return table, overhead, per_item


def workload(rows: int, train: bool, key_bits: int) -> Counts:
    """The MatMul layer's operations over `rows` credit rows in batches of BATCH."""
    x_b, x_a, _ = credit_arrays(rows)
    counter = MatmulCounter(key_bits, 16, x_b.shape[1], x_a.shape[1])
    total = Counts()
    for start in range(0, rows, BATCH):
        part = slice(start, start + BATCH)
        total.add(counter.batch(x_b[part], x_a[part], train=train, m1=True))
    return total


def report(args, table, overhead, per_item) -> str:
    load = os.getloadavg()
    lines = [
        f"Scale-out of Paillier work, {args.key_bits}-bit key, {os.cpu_count()} cores "
        f"(shared machine; load average 1/5/15 min: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f})",
        "",
        "| engine | decryptions/s | re-randomisations/s | products mod n^2/s |",
        "|---|---|---|---|",
    ]
    for name, row in table.items():
        lines.append(
            f"| {name} | {row['decrypt']:,.0f} | {row['rerandomize']:,.0f} | "
            f"{row['product']:,.0f} |"
        )
    lines += ["", "per-task overhead o (empty tasks, per slot):"]
    lines += [f"  {name}: {o * 1e3:.2f} ms" for name, o in overhead.items()]
    o = overhead.get("Ray", overhead["2 local processes"])
    b10 = {k: max(1, math.ceil(10 * o / t)) for k, t in per_item.items()}
    lines += [
        "",
        "block size from which the overhead is under 10% of a task's work, b_10 = 10 o / t:",
    ]
    lines += [
        f"  {k}: t = {t * 1e3:.3f} ms/item -> b_10 = {b10[k]:,} items per task"
        for k, t in per_item.items()
    ]
    blocks = {k: max(b, math.ceil(args.min_task_ms * 1e-3 / per_item[k])) for k, b in b10.items()}
    costs = {
        "decrypt": per_item["decrypt"] + o / blocks["decrypt"],
        "rerandomize": per_item["rerandomize"] + o / blocks["rerandomize"],
        "product": per_item["product"] + o / blocks["product"],
    }
    epoch = workload(args.rows, True, args.key_bits)
    predict_rows = 20_000
    predict = workload(predict_rows, False, args.key_bits)
    scale = 1_000_000 / predict_rows
    lines += [
        "",
        "projection (the work's floor; no round trips, serial steps or PSI):",
        "  T(C) = [N_dec (t_dec + o/b_dec) + (N_obf + N_fresh) (t_rr + o/b_rr)"
        " + N_prod (t_prod + o/b_prod)] / C",
        f"  with o = {o * 1e3:.2f} ms (Ray), b = max(b_10, --min-task-ms {args.min_task_ms} / t), "
        "fresh encryptions counted as full re-randomisations (an upper bound)",
    ]
    cases = [
        (f"credit epoch, {args.rows:,} rows, batch {BATCH}, m1 per batch", epoch, 1.0),
        ("prediction of 1e6 credit rows (20,000 counted, x 50)", predict, scale),
    ]
    for label, c, k in cases:
        n_dec, n_rr, n_prod = k * c.decryptions, k * (c.obfuscators + c.fresh), k * c.products
        work = n_dec * costs["decrypt"] + n_rr * costs["rerandomize"] + n_prod * costs["product"]
        lines.append(
            f"  {label}: N_dec {n_dec:,.0f}, N_obf+fresh {n_rr:,.0f}, N_prod {n_prod:,.0f}"
            f" -> {work:,.0f} core-s"
        )
        lines.append("    " + ", ".join(f"{cores} cores: {work / cores:,.1f} s" for cores in CORES))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(
        prog="python -m bench.scale_out", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--key-bits", type=int, default=2048)
    ap.add_argument("--items", type=int, default=256, help="ciphertexts per measurement")
    ap.add_argument("--rows", type=int, default=30_000, help="credit rows of the epoch")
    ap.add_argument(
        "--min-task-ms", type=float, default=0.0, help="a floor under b_10, as in compute:"
    )
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "scale_out.txt"))
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()}", flush=True)
    table, overhead, per_item = measure(args)
    text = report(args, table, overhead, per_item)
    print(text)
    Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
