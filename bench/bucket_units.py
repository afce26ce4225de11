"""bench/bucket_sum.py's unit costs (one operation of each scheme, OU and Paillier, as the
kernel runs it, timed on one core, the least of a few runs), the floors they make, and
the simulated tree whose nodes the bench sums."""

from __future__ import annotations

import secrets
import time
from collections import Counter
from collections.abc import Callable

import gmpy2
import numpy as np
from gmpy2 import mpz
from vfl.secure.histograms import (
    Layout,
)
from vfl.secure.histograms.blocks import SumTable, sum_block
from vfl.secure.ou import OuKeyPair, OwnerEncryptor, Rerandomizer
from vfl.secure.ou.cipher import decrypt as ou_decrypt
from vfl.secure.paillier.engine import Paillier
from vfl.secure.paillier.keys import KeyPair
from vfl.secure.paillier.obfuscators import ObfuscatorPool

SCALE_BITS, BOUND, VALUES = 24, 1.0, 2
OPS = ("encrypt", "add", "square", "inverse", "rerandomize", "decrypt")


def best(fn: Callable[[], object], items: int, repeats: int = 3) -> float:
    """One-core CPU seconds per item: the minimum over `repeats` runs of fn()."""
    runs = []
    for _ in range(repeats):
        begun = time.process_time()
        fn()
        runs.append((time.process_time() - begun) / items)
    return min(runs)


ADD_COLUMNS = 10  # the unit cost of an addition: the kernel's loop over this many columns


def adds(modulus: mpz, cts: list[mpz], width: int) -> Callable[[], object]:
    """The kernel's own bucket loop (`sum_block`) over `cts`, 10 columns of 32 bins, too
    few rows to pair them (each ciphertext read once for 10 additions, as in a tree)."""
    data = b"".join(int(c).to_bytes(width, "big") for c in cts)
    rows = np.frombuffer(data, dtype=np.uint8).reshape(len(cts), 1, width)
    shape = (len(cts), ADD_COLUMNS)
    codes = np.random.default_rng(0).integers(0, 32, size=shape).astype(np.uint8)
    table = SumTable(rows, codes, (32,) * ADD_COLUMNS, int(modulus))
    return lambda: sum_block(table, np.arange(len(cts)))


def ou_units(keys: OuKeyPair, layout: Layout, count: int = 400) -> dict[str, float]:
    encryptor = OwnerEncryptor(keys.private, layout.unit_bits)
    plain = [secrets.randbelow(1 << (layout.unit_bits - 2)) for _ in range(count)]
    cts = encryptor.encrypt(plain)
    n, bits = keys.public.n, layout.unit_bits
    rerandomize = Rerandomizer(keys.public)
    return {
        "encrypt": best(lambda: encryptor.encrypt(plain), count),
        "add": best(adds(n, cts, keys.public.width), ADD_COLUMNS * count),
        "square": best(lambda: [gmpy2.powmod(c, mpz(1) << bits, n) for c in cts], count * bits),
        "inverse": best(lambda: [gmpy2.invert(c, n) for c in cts], count),
        "rerandomize": best(lambda: rerandomize.apply(cts), count),
        "decrypt": best(lambda: ou_decrypt(keys.private, cts), count),
    }


def rerandomized(cts: list[mpz], obfuscators: list[mpz], nsq: mpz) -> list[mpz]:
    return [c * r % nsq for c, r in zip(cts, obfuscators, strict=True)]


def paillier_units(keys: KeyPair, layout: Layout, count: int = 100) -> dict[str, float]:
    fresh = ObfuscatorPool(keys.public, keys.private, 0, 1, False, short_exponent=True)
    peer = ObfuscatorPool(keys.public, None, 0, 1, False, "fixed-base")
    fresh.prepare()
    peer.prepare()
    own = Paillier(keys.public, keys.private, pool=fresh, threads=1)
    plain = [secrets.randbelow(1 << (layout.unit_bits - 2)) for _ in range(count)]
    cts = own.encrypt(plain)
    nsq, bits = keys.public.nsquare, layout.unit_bits
    units = {
        "encrypt": best(lambda: own.encrypt(plain), count),
        "add": best(adds(nsq, cts * 4, keys.public.width), ADD_COLUMNS * 4 * count),
        "square": best(lambda: [gmpy2.powmod(c, mpz(1) << bits, nsq) for c in cts], count * bits),
        "inverse": best(lambda: [gmpy2.invert(c, nsq) for c in cts], count),
        "rerandomize": best(lambda: rerandomized(cts, peer.compute(count), nsq), count),
        "decrypt": best(lambda: own.decrypt(cts), count),
    }
    fresh.close()
    peer.close()
    return units


# --- operation counts --------------------------------------------------------------------


def measure_units(keys) -> dict[int, dict[str, dict[str, float]]]:
    units = {}
    for bits, (ou, paillier) in keys.items():
        probe = Layout.create(VALUES, 30_000, BOUND, SCALE_BITS, ou.public.plaintext_bits)
        units[bits] = {"OU": ou_units(ou, probe), "Paillier": paillier_units(paillier, probe)}
        print(f"  units at {bits} bits measured", flush=True)
    return units


def floors(
    counts: dict[str, Counter[str]], units: dict[str, float], cores: int
) -> dict[str, float]:
    return {
        step: sum(n * units[op] for op, n in ops.items()) / cores for step, ops in counts.items()
    }


# --- the kernel, measured ----------------------------------------------------------------


def unit_table(units, keys) -> list[str]:
    lines = [
        "Unit costs, one core (ms; CPU time, the minimum of 3 runs before the trees and 3 "
        "after); add = one ciphertext into a bucket (the kernel's loop), square = one bit of "
        "a pack shift",
        "",
        "| op | " + " | ".join(f"OU {b} | Paillier {b} | P/OU" for b in sorted(units)) + " |",
        "|---|" + "---|---|---|" * len(units),
    ]
    for op in OPS:
        cells = []
        for bits in sorted(units):
            ou, pa = units[bits]["OU"][op], units[bits]["Paillier"][op]
            cells.append(f"{ou * 1e3:.4f} | {pa * 1e3:.4f} | {pa / ou:.1f}x")
        lines.append(f"| {op} | " + " | ".join(cells) + " |")
    sizes = []
    for bits in sorted(units):
        ou, pa = keys[bits]
        sizes.append(
            f"{bits}: OU {ou.public.width} B/ciphertext, {ou.public.plaintext_bits}-bit "
            f"plaintexts; Paillier {pa.public.width} B, {bits - 1}-bit"
        )
    return lines + ["", "Sizes: " + "; ".join(sizes)]


def simulated_tree(rows: int, depth: int, seed: int = 0) -> list[list[np.ndarray]]:
    """The rows of each node, level by level (depth levels of nodes that get histograms),
    every split in halves of a random row order."""
    rng = np.random.default_rng(seed)
    levels = [[np.arange(rows)]]
    for _ in range(1, depth):
        children = []
        for node in levels[-1]:
            order = rng.permutation(node)
            half = len(node) // 2
            children += [np.sort(order[:half]), np.sort(order[half:])]
        levels.append(children)
    return levels


def pairs(level: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
    """The children of each node of the level above, as (smaller, larger)."""
    return [
        (a, b) if len(a) <= len(b) else (b, a) for a, b in zip(level[::2], level[1::2], strict=True)
    ]
