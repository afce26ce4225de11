"""Parts of bench/secure_step.py: the cost of the Paillier primitives, and the MatMul
source layer on a credit-table shape and on real a9a batches.

    credit  N=256 rows per batch, d_A=13, d_B=10 dense features (a 23-feature credit
            table), h=8 and h=32; FATE's hetero-NN interactive layer takes 21 s per
            batch of 256 on these machines, the target is >= 50x (<= 0.42 s)
    a9a     batches of 256 real a9a rows (binary one-hot, A: 73 features, ~7.7 nnz per
            row; B: 50 features, ~6.2 nnz per row), h=1, integer features (f_X = 0) as
            the platform configures them; an epoch is 128 batches

Variants: "before" = one full exponentiation per r^n and one row per ciphertext (the
code before fixed-base tables and row packing); "inline" = the defaults, every r^n
computed inside the step; "online" = the defaults with the pools filled beforehand (what
background refill during peer waits buys in a deployment with one machine per party);
"in a row" = consecutive batches with each party in its own loop, as in training, pools
refilled in the background, both parties' work on these cores (s/batch of an epoch).
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import gmpy2
import numpy as np
import scipy.sparse as sp
from vfl.secure.channel import InProcessHub
from vfl.secure.config import SecureConfig
from vfl.secure.paillier.engine import Paillier
from vfl.secure.paillier.obfuscators import ObfuscatorPool
from vfl.secure.source_layers.matmul import ActiveSourceLayer, PassiveSourceLayer

FATE_SECONDS_PER_BATCH = 21.0
A9A = Path(os.environ.get("VFL_SHARED_DATA", "/work/shared/data")) / "a9a"


@dataclass(frozen=True)
class Shape:
    n: int
    d_a: int
    d_b: int
    h: int
    feature_bits: int = 16


def time_primitives(keys, count: int = 24) -> dict[str, float]:
    """Milliseconds per r^n (peer key: full / fixed-base; own key: CRT / CRT tables),
    per CRT decryption (1 and 2 threads), and per 62-bit ciphertext shift."""
    pub, priv = keys["A"].public, keys["B"].private
    out = {}
    for label, private in (("peer", None), ("own", priv)):
        key = pub if private is None else keys["B"].public
        full = ObfuscatorPool(key, private, 0, 1, False, "full")
        out[f"{label} full"] = _per_item(lambda c, pool=full: pool.compute(c), count)
        table = ObfuscatorPool(key, private, 0, 1, False, "fixed-base")
        start = time.perf_counter()
        table.prepare()
        out[f"{label} table build s"] = time.perf_counter() - start
        out[f"{label} fixed-base"] = _per_item(lambda c, pool=table: pool.compute(c), 8 * count)
        helped = ObfuscatorPool(key, private, 0, 1, False, "fixed-base", helpers=1)
        helped.prepare()
        helped.helpers_ready(timeout=60)
        out[f"{label} helped"] = _per_item(lambda c, pool=helped: pool.compute(c), 8 * count)
        helped.close()
    cts = Paillier(keys["B"].public).encrypt(list(range(count)))
    for threads in (1, 2):
        he = Paillier(keys["B"].public, priv, threads=threads)
        out[f"decrypt {threads}"] = _per_item(lambda c, he=he: he.decrypt(cts[:c]), count)
    shift = gmpy2.mpz(1) << 62
    nsq = keys["B"].public.nsquare
    out["shift"] = _per_item(lambda c: [gmpy2.powmod(x, shift, nsq) for x in cts[:c]], count)
    return out


def _per_item(fn, count: int) -> float:
    start = time.perf_counter()
    fn(count)
    return (time.perf_counter() - start) / count * 1e3


def print_primitives(ms: dict[str, float]) -> None:
    print(
        f"\nPrimitives (2 cores shared with the rest of the machine, ms each):\n"
        f"  r^n for a peer's key: full exponentiation {ms['peer full']:.2f}, fixed-base table "
        f"{ms['peer fixed-base']:.2f} ({ms['peer full'] / ms['peer fixed-base']:.1f}x; "
        f"table built once in {ms['peer table build s']:.1f} s), with 1 helper process "
        f"{ms['peer helped']:.2f} ({ms['peer full'] / ms['peer helped']:.1f}x)\n"
        f"  r^n for our own key:  CRT {ms['own full']:.2f}, CRT tables "
        f"{ms['own fixed-base']:.2f} ({ms['own full'] / ms['own fixed-base']:.1f}x; "
        f"tables built once in {ms['own table build s']:.1f} s), with 1 helper process "
        f"{ms['own helped']:.2f} ({ms['own full'] / ms['own helped']:.1f}x)\n"
        f"  CRT decryption: {ms['decrypt 1']:.2f} on 1 thread, {ms['decrypt 2']:.2f} with the "
        f"p and q halves on 2 threads\n"
        f"  one row in a shared ciphertext saves 2 r^n (peer, table) + 2 decryptions = "
        f"{2 * ms['peer fixed-base'] + 2 * ms['decrypt 2']:.1f} ms = "
        f"{(2 * ms['peer fixed-base'] + 2 * ms['decrypt 2']) / ms['shift']:.0f} x a 62-bit "
        f"ciphertext shift ({ms['shift']:.2f}); secure.source_layers.matmul.row_packing assumes 24"
    )


def _layers(keys, shape: Shape, key_bits: int, **overrides):
    """B's and A's MatMul layers over one in-process hub, pools sized for two batches."""
    config = SecureConfig(
        key_bits=key_bits,
        allow_insecure_test_keys=key_bits < 2048,
        feature_bits=shape.feature_bits,
        obfuscator_pool=2 * shape.n,
        **overrides,
    )
    hub = InProcessHub()
    active = ActiveSourceLayer(
        hub.channel("B"), ["A"], shape.d_b, shape.h, config, 1, keypair=keys["B"]
    )
    passive = PassiveSourceLayer(
        hub.channel("A"), "B", shape.d_a, shape.h, config, 2, keypair=keys["A"]
    )
    return active, passive


def run_layer(keys, shape: Shape, batches, key_bits: int, steps: int, **overrides) -> dict:
    """Median seconds per step of the real protocol, both parties as threads."""
    active, passive = _layers(keys, shape, key_bits, background_refill=False, **overrides)
    try:
        both(lambda: active.setup("setup"), lambda: passive.setup("setup"))
        _step(active, passive, batches[0], "warm")  # starts the process pools
        inline = [_step(active, passive, batches[i % len(batches)], f"i{i}") for i in range(steps)]
        offline, online = [], []
        for i in range(steps):
            start = time.perf_counter()
            both(active.fill_obfuscator_pools, passive.fill_obfuscator_pools)
            offline.append(time.perf_counter() - start)
            online.append(_step(active, passive, batches[i % len(batches)], f"o{i}"))
    finally:
        active.close()
        passive.close()
    med = statistics.median
    rows = active.params.rows_per_cipher
    return {"inline": med(inline), "online": med(online), "offline": med(offline), "rows": rows}


def run_training_loop(keys, shape: Shape, batches, key_bits: int, steps: int) -> float:
    """Seconds per batch over `steps` consecutive batches, each party in its own loop as in
    training (B starts the next m1 while A applies the last update), with the obfuscator
    pools refilled in the background while a party waits: everything on these cores."""
    active, passive = _layers(keys, shape, key_bits)

    def active_loop(tags: list[str]) -> None:
        for i, tag in enumerate(tags):
            x_b, grad = batches[i % len(batches)][1:]
            active.forward(tag, x_b)
            active.backward(tag, grad, 0.05)

    def passive_loop(tags: list[str]) -> None:
        for i, tag in enumerate(tags):
            passive.forward(tag, batches[i % len(batches)][0])
            passive.backward(tag, 0.05)

    try:
        both(lambda: active.setup("setup"), lambda: passive.setup("setup"))
        warm = [f"w{i}" for i in range(2)]
        both(lambda: active_loop(warm), lambda: passive_loop(warm))
        tags = [f"t{i}" for i in range(steps)]
        start = time.perf_counter()
        both(lambda: active_loop(tags), lambda: passive_loop(tags))
        return (time.perf_counter() - start) / steps
    finally:
        active.close()
        passive.close()


def both(active_call, passive_call) -> None:
    """Run the passive party's call in a thread beside the active party's; re-raise the
    first error of either."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            passive_call()
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    active_call()
    thread.join()
    if errors:
        raise errors[0]


def _step(active, passive, batch, tag: str) -> float:
    x_a, x_b, grad = batch
    start = time.perf_counter()
    both(lambda: active.forward(tag, x_b), lambda: passive.forward(tag, x_a))
    both(lambda: active.backward(tag, grad, 0.05), lambda: passive.backward(tag, 0.05))
    return time.perf_counter() - start


def credit_batches(shape: Shape, count: int = 3) -> list:
    rng = np.random.default_rng(4)
    return [
        (
            rng.normal(size=(shape.n, shape.d_a)),
            rng.normal(size=(shape.n, shape.d_b)),
            rng.normal(size=(shape.n, shape.h)) / shape.n,
        )
        for _ in range(count)
    ]


def a9a_batches(n: int, count: int = 3) -> list:
    """The first count*n rows of the a9a vertical split: (host CSR, guest CSR, grad)."""
    host, guest = (
        _libsvm(A9A / name, n * count, dim) for name, dim in (("a9a.host", 73), ("a9a.guest", 50))
    )
    rng = np.random.default_rng(5)
    return [
        (host[i * n : (i + 1) * n], guest[i * n : (i + 1) * n], rng.normal(size=(n, 1)) / n)
        for i in range(count)
    ]


def _libsvm(path: Path, rows: int, dim: int) -> sp.csr_matrix:
    x = sp.lil_matrix((rows, dim))
    with open(path) as lines:
        for i, line in zip(range(rows), lines, strict=False):
            for token in line.split()[1:]:
                if ":" in token:
                    index, value = token.split(":")
                    x[i, int(index) - 1] = float(value)
    return x.tocsr()


def print_shape_table(title: str, rows: list[tuple[str, float]], per_epoch: int = 0) -> None:
    """rows: (label, seconds per batch)."""
    print(f"\n{title}")
    extra = f" | {'s/epoch':>8}" if per_epoch else ""
    print(f"| {'variant':<58} | {'s/batch':>8} | {'FATE 21 s /':>11}{extra} |")
    print(f"|{'-' * 60}|{'-' * 10}|{'-' * 13}" + (f"|{'-' * 10}" if per_epoch else "") + "|")
    for label, seconds in rows:
        epoch = f" | {seconds * per_epoch:>8.1f}" if per_epoch else ""
        print(
            f"| {label:<58} | {seconds:>8.2f} | {FATE_SECONDS_PER_BATCH / seconds:>10.0f}x{epoch} |"
        )


def run_shapes(which: str, keys, key_bits: int, steps: int) -> None:
    """Print the before/after table of the credit (h=8, h=32) or the a9a (h=1) shape."""
    if which == "credit":
        cases = [(Shape(256, 13, 10, h), credit_batches(Shape(256, 13, 10, h))) for h in (8, 32)]
        per_epoch, title = 0, "credit shape: N=256, d_A=13, d_B=10 dense, f_X=16"
    else:
        cases = [(Shape(256, 73, 50, 1, feature_bits=0), a9a_batches(256))]
        per_epoch, title = 128, "a9a: batches of 256 real rows, d_A=73, d_B=50 binary, f_X=0"
    rows = []
    for shape, batches in cases:
        before = run_layer(
            keys, shape, batches, key_bits, steps, obfuscator="full", rows_per_cipher=1
        )
        after = run_layer(keys, shape, batches, key_bits, steps)
        loop = run_training_loop(keys, shape, batches, key_bits, 4 * steps)
        rows += [
            (f"h={shape.h}: before (full r^n, 1 row/ciphertext), r^n inline", before["inline"]),
            (f"h={shape.h}: before, r^n precomputed ({before['offline']:.2f} s)", before["online"]),
            (
                f"h={shape.h}: fixed-base r^n, {after['rows']} rows/ciphertext, inline",
                after["inline"],
            ),
            (f"h={shape.h}: same, r^n precomputed ({after['offline']:.2f} s)", after["online"]),
            (f"h={shape.h}: same, {4 * steps} batches in a row, refill in background", loop),
        ]
    print_shape_table(
        f"{title}, {key_bits}-bit keys, {os.cpu_count()} cores, parties as threads, "
        f"median of {steps} steps",
        rows,
        per_epoch,
    )
