"""Encrypted bucket sums (`secure.histograms`) per tree, against their floor, with the
scheme chosen by measurement: Okamoto-Uchiyama (the kernel) beside packed Paillier.

    python -m bench.bucket_sum [--shapes credit,fate] [--trees 3] [--fate-depth 3]
                               [--units 2048,3072] [--out bench/results/bucket_sum.txt]

Run it under `flock /tmp/vfl-bench.lock` on a shared machine.

Shapes: credit (30,000 rows, the passive party's 10 columns x 32 bins, depth 5) and
FATE's published one (100,000 rows, 300 passive columns x 32 bins, depth 3: FATE 2.x's
114 s per tree on 2 x 16 cores at 1024 bits). Per row the active party encrypts k = 2
values (a gradient in [-1, 1], a hessian in [0, 1/4]) at scale 2^24. A tree is the
TREES.md design: the root's sums over all rows; below it, at each split (halves: the
conservative case), the smaller child summed over its rows and the larger one by
homomorphic subtraction from the parent; every node's buckets packed, re-randomised and
decrypted. Measured: the kernel end to end through the API, each party with its own
local executor of 2 processes (`compute.min_task_ms` 20), both on this machine, with
the wire forms (the rows' payload decoded and checked at the passive party, every packed
payload at the active one); the median over --trees trees (5; one for FATE's shape). CPU s:
the user and system seconds of this process and both parties' workers in the step (from
/proc, in 10 ms ticks): the work, whatever else the machine runs.

Floor: each step's operations (counted from the shape, the layout and the tree) times
the unit cost of each, measured here on one core (CPU time, the minimum of 3 runs before
the trees and 3 after, so that a busy moment of a shared machine does not inflate it),
divided by 2 cores. The same counts with Paillier's unit costs (its fastest sound
operations: short-exponent CRT tables for the owner's encryptions, CRT decryption,
statistical fixed-base re-randomisation, products mod n^2, 2047-bit plaintexts) give
Paillier's floor beside. "variant" lines: the active party subtracting in plaintext
instead (only the root and the smaller children are packed and decrypted), measured in
trees alternating with the others; "at 3072 bits": the floor at the other key size.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from vfl.secure.config import SecureConfig
from vfl.secure.executor import LocalExecutor
from vfl.secure.histograms import (
    Bins,
    BucketSummer,
    Layout,
    decrypt,
    encrypt_rows,
    pack,
    packed_from_payload,
    packed_to_payload,
    rows_from_payload,
    rows_to_payload,
    subtract,
)
from vfl.secure.histograms.plan import sum_products
from vfl.secure.ou import OuKeyPair, generate_ou_keypair
from vfl.secure.paillier.counters import OpCounts
from vfl.secure.paillier.keys import KeyPair, generate_keypair

from bench.procs import tree_cpu_seconds

SCALE_BITS, BOUND, VALUES = 24, 1.0, 2
from bench.bucket_units import (  # noqa: E402
    floors,
    measure_units,
    pairs,
    simulated_tree,
    unit_table,
)

STEPS = ("encrypt", "rows wire", "root sums", "child sums", "subtract", "pack", "decrypt")


@dataclass(frozen=True)
class Shape:
    name: str
    rows: int
    columns: int
    bins: int
    depth: int

    @property
    def buckets(self) -> int:
        return self.columns * self.bins


# --- unit costs --------------------------------------------------------------------------


def tree_counts(
    shape: Shape, layout: Layout, capacity: int, plain_subtraction: bool = False
) -> dict[str, Counter[str]]:
    """Operations per step of one tree of `shape` (rows, splits and nodes of
    `simulated_tree`), packing `capacity` plaintext bits per ciphertext."""
    parts, bits = layout.parts, layout.unit_bits
    per = capacity // bits
    levels = simulated_tree(shape.rows, shape.depth)
    splits = sum(len(level) for level in levels[:-1])
    returned = 1 + splits if plain_subtraction else sum(len(level) for level in levels)
    units = shape.buckets * parts
    packed = -(-units // per)
    counts: dict[str, Counter[str]] = {step: Counter() for step in STEPS}
    counts["encrypt"]["encrypt"] = shape.rows * parts
    columns = (shape.bins,) * shape.columns
    counts["root sums"]["add"] = sum_products(shape.rows, columns) * parts
    counts["child sums"]["add"] = parts * sum(
        sum_products(len(small), columns) for level in levels[1:] for small, _ in pairs(level)
    )
    if not plain_subtraction:  # one inversion for all, 3 products each (Montgomery), + 1
        counts["subtract"].update(inverse=splits, add=4 * splits * units)
    counts["pack"].update(
        square=returned * (units - packed) * bits,
        add=returned * (units - packed),
        rerandomize=returned * packed,
    )
    counts["decrypt"]["decrypt"] = returned * packed
    return counts


def gradients(rows: int, rng: np.random.Generator) -> np.ndarray:
    p = rng.uniform(0.01, 0.99, size=rows)
    y = rng.integers(0, 2, size=rows)
    return np.stack([p - y, p * (1 - p)], axis=1)


Run = tuple[dict[str, float], dict[str, float], dict[str, int]]


def run_tree(
    shape: Shape,
    keys: OuKeyPair,
    layout: Layout,
    values: np.ndarray,
    bins: Bins,
    executors: tuple[LocalExecutor, LocalExecutor],
    counts: OpCounts | None = None,
    plain_subtraction: bool = False,
) -> Run:
    """One tree's kernel work: seconds per step and bytes each way (and its operations
    in `counts`). `plain_subtraction`: the variant where the active party subtracts the
    decrypted sums (only the root and the smaller children cross back)."""
    active, passive = executors
    seconds: dict[str, float] = dict.fromkeys(STEPS, 0.0)
    cpu: dict[str, float] = dict.fromkeys(STEPS, 0.0)
    sent = {"active -> passive": 0, "passive -> active": 0}
    me = os.getpid()

    def timed(step: str, fn: Callable[[], object]) -> object:
        used = tree_cpu_seconds(me)  # this process and both parties' workers
        begun = time.perf_counter()
        out = fn()
        seconds[step] += time.perf_counter() - begun
        cpu[step] += tree_cpu_seconds(me) - used
        return out

    rows = timed("encrypt", lambda: encrypt_rows(values, keys.private, layout, active, counts))
    payload = timed("rows wire", lambda: rows_to_payload(rows).SerializeToString())
    sent["active -> passive"] += len(payload)
    received = timed("rows wire", lambda: rows_from_payload(_parse(payload), keys.public, layout))
    summer = BucketSummer(received, bins, passive, counts)

    def give_back(histogram) -> np.ndarray:
        data = timed("pack", lambda: packed_to_payload(pack(histogram, None, passive, counts)))
        wire = data.SerializeToString()
        sent["passive -> active"] += len(wire)
        back = packed_from_payload(_parse(wire), keys.public, layout, shape.buckets)
        return timed("decrypt", lambda: decrypt(back, keys.private, counts=counts))

    levels = simulated_tree(shape.rows, shape.depth)
    encrypted = [timed("root sums", summer.sums)]
    plain = [give_back(encrypted[0])]
    root = plain[0]
    for level in levels[1:]:
        smaller = [small for small, _ in pairs(level)]
        sums = timed("child sums", lambda rows_=smaller: summer.sums_each(rows_))
        next_encrypted, next_plain = [], []
        for parent, parent_sums, small in zip(encrypted, plain, sums, strict=False):
            small_sums = give_back(small)
            if plain_subtraction:  # B: the larger child's sums from its parent's
                large_sums = timed("subtract", lambda p=parent_sums, c=small_sums: p - c)
            else:  # A_k: the larger child's encrypted sums, packed and decrypted too
                large = timed("subtract", lambda p=parent, c=small: subtract(p, c))
                large_sums = give_back(large)
                next_encrypted += [small, large]
            next_plain += [small_sums, large_sums]
        encrypted, plain = next_encrypted or [None] * len(next_plain), next_plain
    summer.close()
    check_root(root, values, bins, layout)
    return seconds, cpu, sent


def check_root(sums: np.ndarray, values: np.ndarray, bins: Bins, layout: Layout) -> None:
    """The root's decrypted sums must be numpy's sums of the same fixed-point values."""
    scaled = layout.scaled(values).astype(np.float64) * 2.0**-layout.scale_bits
    expected = np.zeros((bins.total, values.shape[1]))
    for column, offset in enumerate(bins.offsets):
        np.add.at(expected, offset + bins.codes[:, column].astype(np.int64), scaled)
    if not np.array_equal(sums, expected):
        raise SystemExit("the decrypted sums at the root differ from numpy's: a kernel bug")


def _parse(data: bytes):
    from vfl.proto import common_pb2

    payload = common_pb2.Payload()
    payload.ParseFromString(data)
    return payload


def warm(executors: tuple[LocalExecutor, LocalExecutor], keys: OuKeyPair, layout: Layout) -> None:
    """Start the workers and build their tables (once per process and key)."""
    for executor in executors:
        executor.warm_up()
    tiny = np.zeros((256, layout.values))  # the measured layout: the same cached tables
    rows = encrypt_rows(tiny, keys.private, layout, executors[0])
    bins = Bins(np.zeros((256, 1), dtype=int), (2_000,))
    pack(BucketSummer(rows, bins, executors[1]).sums(), executor=executors[1])


def measure(
    shape: Shape, keys: OuKeyPair, layout: Layout, trees: int, variant: bool
) -> tuple[Run, float | None, str]:
    """The median tree of the TREES.md design (seconds per step, bytes), with `variant`
    the median total of the variant's trees, run alternately, and every tree's total."""
    rng = np.random.default_rng(1)
    values = gradients(shape.rows, rng)
    codes = rng.integers(0, shape.bins, size=(shape.rows, shape.columns))
    bins = Bins(codes, (shape.bins,) * shape.columns)
    executors = (LocalExecutor(2, 20.0), LocalExecutor(2, 20.0))
    runs, variants = [], []
    try:
        warm(executors, keys, layout)
        for _ in range(trees):
            runs.append(run_tree(shape, keys, layout, values, bins, executors))
            if variant:
                seconds, _, _ = run_tree(shape, keys, layout, values, bins, executors, None, True)
                variants.append(sum(seconds.values()))
    finally:
        for executor in executors:
            executor.close()
    totals = [sum(seconds.values()) for seconds, _, _ in runs]
    median = runs[totals.index(statistics.median_low(totals))]
    line = ", ".join(f"{t:.2f}" for t in totals)
    if variants:
        line += "; variant " + ", ".join(f"{t:.2f}" for t in variants)
    print(f"  {shape.name}: trees {line} s", flush=True)
    return median, statistics.median_low(variants) if variants else None, line


# --- the table ---------------------------------------------------------------------------


def report(shapes: list[Shape], trees: int, unit_bits: list[int], key_bits: int) -> list[str]:
    lines = [
        f"Encrypted bucket sums per tree, {key_bits}-bit keys, {os.cpu_count()} cores, "
        f"k = {VALUES} values per row at scale 2^{SCALE_BITS}; load average "
        f"{os.getloadavg()[0]:.1f} at the start",
        "",
    ]
    keys: dict[int, tuple[OuKeyPair, KeyPair]] = {}
    for bits in sorted(set(unit_bits) | {key_bits}):
        test = bits < 2048  # --key-bits below 2048: the smoke test's INSECURE keys
        ou = generate_ou_keypair("B", bits, allow_insecure_test_keys=test)
        paillier = generate_keypair("B", SecureConfig(key_bits=bits, allow_insecure_test_keys=test))
        keys[bits] = (ou, paillier)
    units = measure_units(keys)
    ou_keys = keys[key_bits][0]
    measured = []
    for shape in shapes:
        layout = Layout.create(VALUES, shape.rows, BOUND, SCALE_BITS, ou_keys.public.plaintext_bits)
        small = shape.rows <= 50_000  # FATE's shape: one tree, its variant's floor only
        run, variant, line = measure(shape, ou_keys, layout, trees if small else 1, small)
        measured.append((shape, layout, run, variant, line))
    again = measure_units(keys)  # after the trees too: each unit the lesser of the two
    for bits in units:
        for scheme in units[bits]:
            for op, value in again[bits][scheme].items():
                units[bits][scheme][op] = min(units[bits][scheme][op], value)
    lines += unit_table(units, keys)
    for shape, layout, run, variant, line in measured:
        lines += [""] + shape_table(shape, layout, run, variant, units[key_bits], key_bits)
        lines.append(f"trees (seconds, in the order run): {line}")
        lines += other_sizes(shape, units, keys, key_bits)
    return lines


def other_sizes(shape: Shape, units, keys, key_bits: int) -> list[str]:
    """The floor of a tree at the other key sizes of the unit table (2 cores)."""
    lines = []
    for bits in sorted(set(units) - {key_bits}):
        ou = keys[bits][0].public
        layout = Layout.create(VALUES, shape.rows, BOUND, SCALE_BITS, ou.plaintext_bits)
        ou_floor = floors(tree_counts(shape, layout, layout.capacity), units[bits]["OU"], 2)
        pa_floor = floors(tree_counts(shape, layout, bits - 1), units[bits]["Paillier"], 2)
        lines.append(
            f"at {bits} bits: floor {sum(ou_floor.values()):.2f} s (OU, "
            f"{layout.per_cipher} buckets per ciphertext), {sum(pa_floor.values()):.2f} s "
            "(Paillier) on 2 cores"
        )
    return lines


def shape_table(shape, layout, run: Run, variant, units, key_bits) -> list[str]:
    seconds, cpu, sent = run
    ou_counts = tree_counts(shape, layout, layout.capacity)
    pa_counts = tree_counts(shape, layout, key_bits - 1)
    ou_floor, pa_floor = floors(ou_counts, units["OU"], 2), floors(pa_counts, units["Paillier"], 2)
    ou_one = floors(ou_counts, units["OU"], 1)
    lines = [
        f"{shape.name}: {shape.rows:,} rows, {shape.columns} passive columns x {shape.bins} bins "
        f"= {shape.buckets:,} buckets, depth {shape.depth} ({2**shape.depth - 1} nodes); "
        f"slots of {layout.slot_bits} bits, {layout.per_cipher} buckets per OU ciphertext "
        f"({(key_bits - 1) // layout.unit_bits} per Paillier one)",
        "",
        "| step | operations | measured s | CPU s | OU floor s (1 core) | OU floor s (2 cores) "
        "| Paillier floor s (2 cores) |",
        "|---|---|---|---|---|---|---|",
    ]
    for step in STEPS:
        ops = ", ".join(f"{n:,} {op}" for op, n in ou_counts[step].items() if n) or "-"
        lines.append(
            f"| {step} | {ops} | {seconds[step]:.2f} | {cpu[step]:.2f} | {ou_one[step]:.2f} | "
            f"{ou_floor[step]:.2f} | {pa_floor[step]:.2f} |"
        )
    total = sum(seconds.values())
    lines.append(
        f"| tree | | {total:.2f} | {sum(cpu.values()):.2f} | {sum(ou_one.values()):.2f} | "
        f"{sum(ou_floor.values()):.2f} | {sum(pa_floor.values()):.2f} |"
    )
    plain = floors(tree_counts(shape, layout, layout.capacity, True), units["OU"], 2)
    plain_pa = floors(tree_counts(shape, layout, key_bits - 1, True), units["Paillier"], 2)
    lines += [
        "",
        f"bytes: active -> passive {sent['active -> passive'] / 2**20:.1f} MiB (the rows), "
        f"passive -> active {sent['passive -> active'] / 2**20:.2f} MiB (packed buckets); "
        f"Paillier: {shape.rows * key_bits / 4 / 2**20:.1f} MiB and "
        f"{_packed_bytes(shape, layout, key_bits) / 2**20:.2f} MiB",
        "variant, the active party subtracting in plaintext (only the root and the smaller "
        "children packed and decrypted): "
        + (f"measured {variant:.2f} s (median), " if variant is not None else "")
        + f"floor {sum(plain.values()):.2f} s (OU), {sum(plain_pa.values()):.2f} s (Paillier) "
        "on 2 cores",
    ]
    return lines


def _packed_bytes(shape: Shape, layout: Layout, key_bits: int) -> int:
    nodes = 2**shape.depth - 1
    per = (key_bits - 1) // layout.unit_bits
    return nodes * -(-shape.buckets * layout.parts // per) * key_bits // 4


SHAPES = {
    "credit": Shape("credit", 30_000, 10, 32, 5),
    "fate": Shape("fate", 100_000, 300, 32, 3),
    "tiny": Shape("tiny", 600, 3, 8, 3),  # the smoke test's
}


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.bucket_sum", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--shapes", default="credit,fate", help=f"of {sorted(SHAPES)}")
    parser.add_argument("--trees", type=int, default=5, help="trees per shape (FATE's: 1)")
    parser.add_argument("--fate-depth", type=int, default=3)
    parser.add_argument("--units", default="2048,3072", help="key sizes of the unit table")
    parser.add_argument("--key-bits", type=int, default=2048, help="of the measured trees")
    parser.add_argument("--out", type=Path, help="also write the table here")
    args = parser.parse_args()
    shapes = [SHAPES[name] for name in args.shapes.split(",")]
    shapes = [
        Shape(s.name, s.rows, s.columns, s.bins, args.fate_depth) if s.name == "fate" else s
        for s in shapes
    ]
    lines = report(shapes, args.trees, [int(b) for b in args.units.split(",")], args.key_bits)
    lines.append(f"\nload average {os.getloadavg()[0]:.1f} at the end")
    text = "\n".join(lines)
    print("\n" + text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
