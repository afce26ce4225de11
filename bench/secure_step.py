"""Time one secure MatMul source-layer training step against a naive per-element baseline.

    python -m bench.secure_step            N=256, d_A=d_B=100, h=32, 2048-bit keys, K=1
    python -m bench.secure_step --quick    a smaller run
    python -m bench.secure_step --embed    the Embed-MatMul layer: 26 fields, k=8 (no baseline)
    python -m bench.secure_step --shape credit   N=256, d_A=13, d_B=10, h=8 and 32: s/batch
                                                 before/after, and the ratio to FATE's 21 s
    python -m bench.secure_step --shape a9a      real a9a batches, h=1: s/batch and s/epoch
    python -m bench.secure_step --bfv            BFV against Paillier 2048/3072 on the credit
                                                 (h=8, 32) and a9a shapes (bench.bfv_step)

The secure step runs the real protocol (`secure.source_layers.matmul`) with both parties as
threads over the in-process channel. The naive baseline does the same arithmetic with
one `phe.EncryptedNumber` per matrix element (float encoding, no packing, no
multi-exponentiation); it is measured on a sub-block of the batch (n rows, k outputs) and
extrapolated linearly by (N*h)/(n*k), since every one of its costs (encryptions,
decryptions, scalar products) scales with N*h. The "before" row is the same protocol with
one full exponentiation per r^n and one row per ciphertext. Every run also prints the cost
of the primitives (r^n full vs fixed-base, CRT decryption); see `secure_shapes.py`.
"""

from __future__ import annotations

import argparse
import os
import threading
import time

import numpy as np
from phe import paillier
from vfl.secure.channel import InProcessHub
from vfl.secure.config import SecureConfig
from vfl.secure.paillier.cipher_matmul import CipherMatmul, feature_exponents
from vfl.secure.paillier.encoding import Packer
from vfl.secure.paillier.engine import Paillier
from vfl.secure.paillier.keys import keypair_from_phe
from vfl.secure.source_layers.embed import ActiveEmbedLayer, PassiveEmbedLayer
from vfl.secure.source_layers.matmul import ActiveSourceLayer, PassiveSourceLayer

from bench.secure_shapes import print_primitives, run_shapes, time_primitives


def _in_thread(fn, *args):
    errors: list[BaseException] = []

    def run() -> None:
        try:
            fn(*args)
        except BaseException as exc:  # noqa: BLE001 - re-raised in join()
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()

    def join() -> None:
        thread.join()
        if errors:
            raise errors[0]

    return join


def secure_step(active, passive, x_a, x_b, grad, tag: str) -> float:
    start = time.perf_counter()
    join = _in_thread(passive.forward, tag, x_a)
    active.forward(tag, x_b)
    join()
    join = _in_thread(passive.backward, tag, 0.05)
    active.backward(tag, grad, 0.05)
    join()
    return time.perf_counter() - start


def run_secure(args, keys, data, **overrides) -> dict[str, float]:
    n, d, h = args.n, args.d, args.h
    x_a, x_b, grad = data
    pool = n * Packer(args.key_bits, 62, 40).columns(h)
    config = SecureConfig(
        key_bits=args.key_bits,
        allow_insecure_test_keys=args.key_bits < 2048,
        obfuscator_pool=pool,
        background_refill=False,
        **overrides,
    )
    hub = InProcessHub()
    active = ActiveSourceLayer(hub.channel("B"), ["A"], d, h, config, 1, keypair=keys["B"])
    passive = PassiveSourceLayer(hub.channel("A"), "B", d, h, config, 2, keypair=keys["A"])
    try:
        join = _in_thread(passive.setup, "setup")
        active.setup("setup")
        join()
        secure_step(active, passive, x_a, x_b, grad, "warm")  # starts the process pools
        inline = secure_step(active, passive, x_a, x_b, grad, "inline")
        start = time.perf_counter()
        join = _in_thread(passive.fill_obfuscator_pools)
        active.fill_obfuscator_pools()
        join()
        offline = time.perf_counter() - start
        online = secure_step(active, passive, x_a, x_b, grad, "online")
    finally:
        active.close()
        passive.close()
    return {"inline": inline, "online": online, "offline": offline}


def run_embed(args, keys) -> dict[str, float]:
    """One Embed-MatMul step: N rows of 26 fields with 100 codes each, k=8, h outputs."""
    fields, n, h = [100] * 26, args.n, args.h
    config = SecureConfig(
        key_bits=args.key_bits,
        allow_insecure_test_keys=args.key_bits < 2048,
        obfuscator_pool=40 * n,  # every r^n of one step
        background_refill=False,
    )
    hub = InProcessHub()
    active = ActiveEmbedLayer(
        hub.channel("B"), ["A"], {"A": fields}, 8, h, config, 1, keypair=keys["B"]
    )
    passive = PassiveEmbedLayer(hub.channel("A"), "B", fields, 8, h, config, 2, keypair=keys["A"])
    rng = np.random.default_rng(1)
    codes, grad = rng.integers(0, 100, size=(n, len(fields))), rng.normal(size=(n, h)) / n

    def step(tag: str) -> float:
        start = time.perf_counter()
        join = _in_thread(passive.forward, tag, codes)
        active.forward(tag)
        join()
        join = _in_thread(passive.backward, tag, 0.05)
        active.backward(tag, grad, 0.05)
        join()
        return time.perf_counter() - start

    try:
        join = _in_thread(passive.setup, "setup")
        active.setup("setup")
        join()
        inline = step("inline")
        start = time.perf_counter()
        join = _in_thread(passive.fill_obfuscator_pools)
        active.fill_obfuscator_pools()
        join()
        return {"inline": inline, "offline": time.perf_counter() - start, "online": step("online")}
    finally:
        active.close()
        passive.close()


def run_xtg(args, keys, data) -> float:
    """X^T [[G]] alone, packed, multi-exp over all cores (the design's cost table row)."""
    x_a, _, grad = data
    he = Paillier(keys["B"].public, keys["B"].private)
    packer = Packer(args.key_bits, 62, 40)
    cols = packer.columns(args.h)
    packed = packer.pack(np.rint(grad * 2**20).astype(np.int64))
    cts = [he.encrypt(row) for row in packed]
    engine = CipherMatmul()
    try:
        engine.warm_up()
        exps = feature_exponents(x_a, 16).T.tocsr()
        start = time.perf_counter()
        engine.matmul(exps, cts, he.pk.nsquare, cols)
        return time.perf_counter() - start
    finally:
        engine.close()


def run_naive(args, phe_keys, data) -> float:
    """The same step with one phe EncryptedNumber per element, on rows x outputs."""
    (pk_a, sk_a), (pk_b, sk_b) = phe_keys["A"], phe_keys["B"]
    rows, outs = args.naive_rows, args.naive_outputs
    x_a, x_b, grad = (m[:rows] for m in data)
    rng = np.random.default_rng(3)
    u_a, v_a, u_b, v_b = (rng.normal(size=(args.d, outs)) * 0.1 for _ in range(4))
    enc_u_b = [[pk_a.encrypt(float(v)) for v in row] for row in u_b]  # setup, not timed
    enc_v_a = [[pk_b.encrypt(float(v)) for v in row] for row in v_a]
    start = time.perf_counter()
    masks = rng.normal(size=(rows, outs))
    m1 = [[_dot(x_b[i], enc_u_b, j) - float(masks[i, j]) for j in range(outs)] for i in range(rows)]
    m1 = [[c.obfuscate() or c for c in row] for row in m1]
    s = np.array([[sk_a.decrypt(c) for c in row] for row in m1])
    plain = x_a @ u_a + s
    m2 = [[_dot(x_a[i], enc_v_a, j) + float(plain[i, j]) for j in range(outs)] for i in range(rows)]
    m2 = [[c.obfuscate() or c for c in row] for row in m2]
    _ = np.array([[sk_b.decrypt(c) for c in row] for row in m2]) + masks + x_b @ v_b
    m3 = [[pk_b.encrypt(float(0.05 * g)) for g in row] for row in grad[:, :outs]]
    for f in range(args.d):
        for j in range(outs):
            delta = _dot(x_a[:, f], m3, j)
            enc_v_a[f][j] = enc_v_a[f][j] - delta
    return time.perf_counter() - start


def _dot(x: np.ndarray, enc, j: int):
    total = None
    for i, value in enumerate(x):
        if value == 0:
            continue
        term = enc[i][j] * float(value)
        total = term if total is None else total + term
    return total


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.secure_step", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="N=64, d=25, h=16")
    parser.add_argument("--key-bits", type=int, default=2048)
    parser.add_argument("--embed", action="store_true", help="time the Embed-MatMul layer")
    parser.add_argument("--shape", choices=("default", "credit", "a9a"), default="default")
    parser.add_argument("--steps", type=int, default=3, help="steps per variant (--shape)")
    parser.add_argument("--bfv", action="store_true", help="BFV vs Paillier (bfv_step.py)")
    args = parser.parse_args()
    if args.bfv:
        from bench.bfv_step import SHAPES, run

        run(args.steps, list(SHAPES), [2048, 3072])
        return
    args.n, args.d, args.h = (64, 25, 16) if args.quick else (256, 100, 32)
    args.naive_rows, args.naive_outputs = (4, 2) if args.quick else (8, 4)
    rng = np.random.default_rng(0)
    data = (
        rng.normal(size=(args.n, args.d)),
        rng.normal(size=(args.n, args.d)),
        rng.normal(size=(args.n, args.h)) / args.n,
    )
    phe_keys = {p: paillier.generate_paillier_keypair(n_length=args.key_bits) for p in "AB"}
    config = SecureConfig(key_bits=args.key_bits, allow_insecure_test_keys=args.key_bits < 2048)
    keys = {p: keypair_from_phe(p, pk, sk, config) for p, (pk, sk) in phe_keys.items()}
    if args.embed:
        seconds = run_embed(args, keys)
        print(
            f"One secure Embed-MatMul step (forward + backward), K=1, N={args.n}, 26 fields of "
            f"100 codes, k=8, h={args.h}, {args.key_bits}-bit keys, {os.cpu_count()} cores, "
            f"parties as threads\n  r^n computed inside the step: {seconds['inline']:.1f} s\n"
            f"  online (r^n precomputed: {seconds['offline']:.1f} s): {seconds['online']:.1f} s"
        )
        return
    if args.shape != "default":
        run_shapes(args.shape, keys, args.key_bits, args.steps)
        print_primitives(time_primitives(keys))
        print(f"load average during the run: {os.getloadavg()[0]:.1f}")
        return
    secure = run_secure(args, keys, data)
    secure["before"] = run_secure(args, keys, data, obfuscator="full", rows_per_cipher=1)["inline"]
    xtg = run_xtg(args, keys, data)
    naive_sub = run_naive(args, phe_keys, data)
    factor = (args.n * args.h) / (args.naive_rows * args.naive_outputs)
    naive = naive_sub * factor
    _print_table(args, secure, xtg, naive_sub, factor, naive)
    print_primitives(time_primitives(keys))


def _print_table(args, secure, xtg, naive_sub, factor, naive) -> None:
    print(
        f"One secure MatMul source-layer step (forward + backward), K=1, in-process channel, "
        f"parties as threads\nN={args.n} d_A=d_B={args.d} h={args.h}, {args.key_bits}-bit "
        f"keys, {os.cpu_count()} cores\n"
    )
    rows = [
        (
            "before: full r^n, one row per ciphertext, r^n computed inside the step",
            secure["before"],
        ),
        ("packed + multi-exp, r^n computed inside the step", secure["inline"]),
        (
            f"packed + multi-exp, online (r^n precomputed: {secure['offline']:.2f} s)",
            secure["online"],
        ),
        (
            f"naive phe EncryptedNumber per element (measured {naive_sub:.1f} s on "
            f"{args.naive_rows}x{args.naive_outputs} of {args.n}x{args.h}, x{factor:.0f})",
            naive,
        ),
    ]
    print(f"| {'variant':<78} | {'seconds':>9} | {'speed-up':>8} |")
    print(f"|{'-' * 80}|{'-' * 11}|{'-' * 10}|")
    for label, seconds in rows:
        print(f"| {label:<78} | {seconds:>9.2f} | {naive / seconds:>7.0f}x |")
    print(
        f"\nX^T [[G]] alone (N={args.n}, d={args.d}, h={args.h}, packed, multi-exp, all cores): "
        f"{xtg:.2f} s" + ("" if args.quick else "  (designed: 0.54 s; 0.31 s on 2 processes)")
    )
    print(f"load average during the run: {os.getloadavg()[0]:.1f} (timings assume idle cores)")


if __name__ == "__main__":
    main()
