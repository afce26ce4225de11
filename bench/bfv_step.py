"""One MatMul source-layer step (forward + backward) with BFV against Paillier at 2048
and 3072 bits: seconds, bytes each way, and the floor of each.

    python -m bench.secure_step --bfv [--steps 3]       (or python -m bench.bfv_step)

Shapes: the credit shape (N=256, d_A=13, d_B=10 dense, f_X=8, h=8 and h=32) and real a9a
batches (N=256, d_A=73, d_B=50 binary, f_X=0, h=1). Both schemes run their real protocol
with both parties as threads over the in-process channel, on the same batches, in the
same run; every obfuscator, encryption of zero and flooding noise is made inside the
step (Paillier's "inline" variant). Seconds and bytes (payloads as serialized, B->A and
A->B) are the median over --steps steps per scheme after one warm-up step each; the
schemes' steps alternate (BFV, Paillier 2048, Paillier 3072, BFV, ...), so that the
background load of a shared machine weighs on each alike.

Floors (seconds of the unavoidable operations, each at its unit cost measured here):
- Paillier: `floor.MatmulCounter` on the step's rows (decryptions, obfuscators, fresh m3
  encryptions, products mod n^2, inverses), divided by the cores, as bench/floor.py does.
- BFV: plaintext x ciphertext products, fresh (seeded) encryptions, encryptions of zero
  under the peer's key (re-randomisation of m1, m2, vr), flooding noise and decryptions,
  counted from the layer's layouts; on one core (SEAL's calls hold the GIL, so the two
  parties' work does not overlap in this process).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from vfl.secure.channel import InProcessHub
from vfl.secure.config import SecureConfig
from vfl.secure.lattice.bfv import BfvContext, KeyPair, PeerKey
from vfl.secure.lattice.params import BfvParams
from vfl.secure.paillier.keys import generate_keypair
from vfl.secure.source_layers.matmul import ActiveSourceLayer, PassiveSourceLayer
from vfl.secure.source_layers.matmul.bfv import ActiveBfvLayer, PassiveBfvLayer

from bench.floor import MatmulCounter, cores, time_primitives as paillier_costs
from bench.secure_shapes import Shape, a9a_batches, both, credit_batches

BFV = "BFV N=8192"


def _step(active, passive, batch, tag: str) -> dict[str, float]:
    """One step's seconds and bytes each way."""
    x_a, x_b, grad = batch
    sent_b, sent_a = active.channel.stats.bytes_sent, passive.channel.stats.bytes_sent
    start = time.perf_counter()
    both(lambda: active.forward(tag, x_b), lambda: passive.forward(tag, x_a))
    both(lambda: active.backward(tag, grad, 0.05), lambda: passive.backward(tag, 0.05))
    return {
        "seconds": time.perf_counter() - start,
        "b_to_a": active.channel.stats.bytes_sent - sent_b,
        "a_to_b": passive.channel.stats.bytes_sent - sent_a,
    }


def paillier_pair(shape: Shape, key_bits: int, keys):
    config = SecureConfig(
        key_bits=key_bits,
        feature_bits=shape.feature_bits,
        obfuscator_pool=2 * shape.n,
        background_refill=False,
    )
    hub = InProcessHub()
    active = ActiveSourceLayer(
        hub.channel("B"), ["A"], shape.d_b, shape.h, config, 1, keypair=keys["B"]
    )
    passive = PassiveSourceLayer(
        hub.channel("A"), "B", shape.d_a, shape.h, config, 2, keypair=keys["A"]
    )
    both(lambda: active.setup("setup"), lambda: passive.setup("setup"))
    return active, passive


def paillier_floor(shape: Shape, batch, key_bits: int) -> float:
    x_a, x_b, _ = batch
    counts = MatmulCounter(key_bits, shape.h, shape.d_b, shape.d_a).batch(
        x_b, x_a, train=True, m1=True, f_b=shape.feature_bits, f_a=shape.feature_bits
    )
    return counts.seconds(paillier_costs(key_bits)) / cores()


def bfv_pair(shape: Shape):
    config = SecureConfig(key_bits=2048, feature_bits=shape.feature_bits)
    hub = InProcessHub()
    active = ActiveBfvLayer(
        hub.channel("B"), ["A"], shape.d_b, shape.h, config, 1, batch_rows=shape.n
    )
    passive = PassiveBfvLayer(hub.channel("A"), "B", shape.d_a, shape.h, config, 2)
    both(lambda: active.setup("setup"), lambda: passive.setup("setup"))
    return active, passive


def run_shape(shape: Shape, batches, key_sizes: list[int], keys, steps: int) -> dict:
    """Every scheme's median step, the schemes' steps interleaved (BFV, Paillier 2048,
    Paillier 3072, BFV, ...) so that a changing background load weighs on all alike."""
    pairs = {BFV: bfv_pair(shape)}
    for bits in key_sizes:
        pairs[f"Paillier {bits}"] = paillier_pair(shape, bits, keys[bits])
    try:
        for active, passive in pairs.values():
            _step(active, passive, batches[0], "warm")  # process pools, first tables
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in pairs}
        for i in range(steps):
            for name, (active, passive) in pairs.items():
                runs[name].append(_step(active, passive, batches[i % len(batches)], f"s{i}"))
        out = {
            name: {k: statistics.median(r[k] for r in rs) for k in rs[0]}
            for name, rs in runs.items()
        }
        bfv_active = pairs[BFV][0]
        counts, unit = bfv_counts(bfv_active, shape.n), bfv_costs(bfv_active.bfv)
        out[BFV]["floor"] = sum(counts[k] * unit[k] for k in counts)
        out[BFV]["counts"], out[BFV]["unit"] = counts, unit
        out[BFV]["layouts"] = (bfv_active.lay_a.width, bfv_active.lay_b.width)
    finally:
        for active, passive in pairs.values():
            active.close()
            passive.close()
    for bits in key_sizes:
        out[f"Paillier {bits}"]["floor"] = paillier_floor(shape, batches[0], bits)
    return out


def bfv_counts(active: ActiveBfvLayer, n: int) -> dict[str, int]:
    """The unavoidable BFV operations of one step of n rows (both parties)."""
    lay_a, lay_b = active.lay_a, active.lay_b
    g_a, g_b, r_a = lay_a.groups(n), lay_b.groups(n), lay_a.row_blocks(n)
    returned = g_b + g_a + lay_a.blocks  # m1, m2, vr: re-randomised, flooded, decrypted
    return {
        "product": g_b * lay_b.blocks + g_a * lay_a.blocks + r_a * lay_a.blocks,
        "fresh": r_a + lay_a.blocks,  # m3, vc
        "zero": returned,
        "noise": returned,
        "decrypt": returned,
    }


def bfv_costs(params: BfvParams, count: int = 20) -> dict[str, float]:
    """Seconds per operation, one core, the minimum of three runs of `count`."""
    ctx = BfvContext(params)
    own = KeyPair(ctx)
    peer = PeerKey(ctx, KeyPair(ctx).public_bytes)
    coeffs = ctx.random_coeffs(1)[0]
    ct = ctx.ciphertext(own.encrypt(coeffs))
    plain = ctx.plaintext(coeffs)
    last = ctx.ciphertext(ctx.flood(ctx.dot([ct], [plain]), peer, 80), last=True)

    def best(fn) -> float:
        runs = []
        for _ in range(3):
            start = time.perf_counter()
            for _ in range(count):
                fn()
            runs.append((time.perf_counter() - start) / count)
        return min(runs)

    return {
        "product": best(lambda: ctx.dot([ct], [plain])),
        "fresh": best(lambda: own.encrypt(coeffs)),
        "zero": best(lambda: peer.zero(ctx.levels[0])),
        "noise": best(lambda: ctx._noise(80)),
        "decrypt": best(lambda: own.decrypt(last)),
    }


SHAPES = {
    "credit8": ("credit", Shape(256, 13, 10, 8, feature_bits=8)),
    "credit32": ("credit", Shape(256, 13, 10, 32, feature_bits=8)),
    "a9a": ("a9a", Shape(256, 73, 50, 1, feature_bits=0)),
}


def shapes(names: list[str]) -> list[tuple[str, Shape, list]]:
    out = []
    for key in names:
        name, shape = SHAPES[key]
        batches = a9a_batches(256) if name == "a9a" else credit_batches(shape)
        out.append((name, shape, batches))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.bfv_step", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--shapes", default="credit8,credit32,a9a", help=f"of {sorted(SHAPES)}")
    parser.add_argument("--key-bits", default="2048,3072", help="Paillier key sizes")
    args = parser.parse_args()
    run(args.steps, args.shapes.split(","), [int(b) for b in args.key_bits.split(",")])


def run(steps: int, names: list[str], key_sizes: list[int]) -> None:
    load_before = os.getloadavg()[0]
    keys = {
        bits: {p: generate_keypair(p, SecureConfig(key_bits=bits)) for p in "AB"}
        for bits in key_sizes
    }
    rows = []
    for name, shape, batches in shapes(names):
        results = run_shape(shape, batches, key_sizes, keys, steps)
        line = ", ".join(f"{k} {v['seconds']:.3f} s" for k, v in results.items())
        print(f"{name} h={shape.h}: {line} (load {os.getloadavg()[0]:.1f})", flush=True)
        rows.append((name, shape, results))
    _print(rows, steps, load_before, os.getloadavg()[0])


def _print(rows, steps: int, load_before: float, load_after: float) -> None:
    print(
        f"One MatMul source-layer step (forward + backward), K=1, parties as threads, "
        f"{cores()} cores, median of {steps} steps per scheme (interleaved), everything computed "
        f"inside the step\n"
        f"load average {load_before:.1f} before, {load_after:.1f} after\n"
    )
    head = (
        f"| {'shape':<14} | {'scheme':<15} | {'s/step':>7} | {'KiB B->A':>9} | {'KiB A->B':>9} "
        f"| {'floor s':>7} | {'s/floor':>7} | {'P2048 / this':>12} |"
    )
    print(head)
    print("|" + "|".join("-" * (len(c) + 0) for c in head.split("|")[1:-1]) + "|")
    for name, shape, results in rows:
        label = f"{name} h={shape.h}"
        p2 = results.get("Paillier 2048", results[BFV])
        for scheme, r in results.items():
            print(
                f"| {label:<14} | {scheme:<15} | {r['seconds']:>7.3f} | {r['b_to_a'] / 1024:>9.0f} "
                f"| {r['a_to_b'] / 1024:>9.0f} | {r['floor']:>7.3f} | "
                f"{r['seconds'] / r['floor']:>6.1f}x | {p2['seconds'] / r['seconds']:>11.1f}x |"
            )
    print("\nBFV operations per step and unit costs (ms, one core):")
    for name, shape, results in rows:
        bfv = results[BFV]
        ops = ", ".join(f"{k} {v} x {bfv['unit'][k] * 1e3:.2f}" for k, v in bfv["counts"].items())
        widths = f"block widths A {bfv['layouts'][0]}, B {bfv['layouts'][1]}"
        print(f"  {name} h={shape.h} ({widths}): {ops}")


if __name__ == "__main__":
    main()
