"""Cost of one Paillier obfuscator at 2048 bits, statistical against short-exponent
(Damgard-Jurik-Nielsen, `secure.paillier.short_exponent`), and what the short ones save
per epoch of a credit-shaped job.

    statistical   uniform n-th residues: r^n for a peer's key, CRT for our own, or the
                  fixed-base tables of `secure.paillier.fixed_base` (2 x 161 products
                  mod p^2, q^2 for our own key; 276 mod n^2 for a peer's)
    short         h_s^a, a of n/2 + 80 bits: by CRT exponentiations or CRT tables at the
                  owner (the default for the owner's fresh encryptions); for comparison,
                  without the factors (mod n^2), by exponentiation or by a table

Every figure is the minimum over `--repeat` runs of `--count` obfuscators on one thread
(single-core cost; a helper process roughly halves the table methods on 2 cores). The
job: B with 13 dense features, one passive party with 10, out_dim 16, batch 256, 30,000
training rows; B encrypts m3 = [[eta G]]_B, one row per ciphertext, every batch.

    python -m bench.obfuscators [--count 32] [--repeat 5]
"""

from __future__ import annotations

import argparse
import math
import secrets
import time
from collections.abc import Callable

import gmpy2
from gmpy2 import mpz
from vfl.secure.config import SecureConfig
from vfl.secure.paillier.fixed_base import ProductTable
from vfl.secure.paillier.keys import KeyPair, generate_keypair
from vfl.secure.paillier.obfuscators import ObfuscatorPool
from vfl.secure.paillier.short_exponent import exponent_bits, power_rows
from vfl.secure.source_layers.matmul.setup import LayerParams

ROWS, BATCH, D_B, D_A, OUT_DIM = 30_000, 256, 13, 10, 16


def per_item_ms(fn: Callable[[int], object], count: int, repeat: int) -> float:
    """Minimum over `repeat` runs of the milliseconds per item of fn(count)."""
    best = math.inf
    for _ in range(repeat):
        start = time.perf_counter()
        fn(count)
        best = min(best, time.perf_counter() - start)
    return best / count * 1e3


def pool_method(key: KeyPair, own: bool, method: str, short: bool = False) -> ObfuscatorPool:
    private = key.private if own else None
    pool = ObfuscatorPool(key.public, private, 0, 1, False, method, short_exponent=short)
    pool.prepare()
    return pool


def short_without_factors(key: KeyPair) -> dict[str, Callable[[int], object]]:
    """h_s^a mod n^2 for a party without p and q: one exponentiation, or a table of
    ceil(bits(a) / 8) rows (for comparison only; nobody computes it this way here)."""
    h_s, nsq = key.public.h_s, key.public.nsquare
    assert h_s is not None
    bits = exponent_bits(key.public.bits)
    rows = -(-bits // 8)
    table = ProductTable(power_rows(h_s, rows, nsq), nsq)

    def powmod(count: int) -> object:
        return gmpy2.powmod_exp_list(h_s, [mpz(secrets.randbits(bits)) for _ in range(count)], nsq)

    def tabled(count: int) -> object:
        return [table.product(secrets.token_bytes(rows)) for _ in range(count)]

    return {"short, exponentiation mod n^2": powmod, "short, table mod n^2": tabled}


def measure(count: int, repeat: int) -> tuple[dict[str, float], dict[str, float]]:
    """(ms per obfuscator, seconds to build the tables) by method."""
    key = generate_keypair("B", SecureConfig())
    ms: dict[str, float] = {}
    build: dict[str, float] = {}
    methods = [
        ("peer key, r^n (statistical)", False, "full", False, 1),
        ("own key, CRT r^n (statistical)", True, "full", False, 1),
        ("peer key, fixed-base tables (statistical)", False, "fixed-base", False, 8),
        ("own key, CRT tables (statistical, old default)", True, "fixed-base", False, 8),
        ("own key, short, CRT exponentiations", True, "full", True, 1),
        ("own key, short, CRT tables (new default)", True, "fixed-base", True, 8),
    ]
    for label, own, method, short, scale in methods:
        start = time.perf_counter()
        pool = pool_method(key, own, method, short)
        if method == "fixed-base":
            build[label] = time.perf_counter() - start
        ms[label] = per_item_ms(pool.compute, scale * count, repeat)
        pool.close()
    for label, fn in short_without_factors(key).items():
        ms[label] = per_item_ms(fn, count, repeat)
    return ms, build


def credit_counts() -> tuple[int, int, int]:
    """(m3 per batch, m1 per batch, rows per m1 ciphertext) of the credit job, from the
    layer's packing parameters: m3 keeps one row per ciphertext, m1 packs k rows."""
    config = SecureConfig(feature_bits=16)
    params = LayerParams.for_active(config, D_B, OUT_DIM, ("A",)).with_row_packing(None, D_A)
    cols = params.packer().columns(OUT_DIM)
    return BATCH * cols, params.layout().groups(BATCH) * cols, params.rows_per_cipher


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.obfuscators", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--count", type=int, default=32, help="obfuscators per timed run")
    parser.add_argument("--repeat", type=int, default=5, help="runs; the minimum counts")
    args = parser.parse_args()
    ms, build = measure(args.count, args.repeat)
    print("2048-bit key, one thread, minimum of runs (machine shared with other jobs)\n")
    print(f"{'method':52} {'ms/obfuscator':>14} {'table build s':>14}")
    for label, value in ms.items():
        built = f"{build[label]:.2f}" if label in build else "-"
        print(f"{label:52} {value:14.3f} {built:>14}")
    m3_batch, m1_batch, k = credit_counts()
    batches = math.ceil(ROWS / BATCH)
    m3 = ROWS * m3_batch // BATCH  # one row per ciphertext: the last, short batch too
    old = ms["own key, CRT tables (statistical, old default)"]
    new = ms["own key, short, CRT tables (new default)"]
    crt = ms["own key, CRT r^n (statistical)"]
    print(
        f"\ncredit job ({ROWS} rows, {batches} batches of {BATCH}): B's m3 = {m3_batch} "
        f"ciphertexts per batch, {m3} per epoch (m1, statistical and unchanged: {m1_batch} "
        f"per batch, {k} rows per ciphertext)\n"
        f"  B's m3 obfuscators per epoch: CRT r^n {m3 * crt / 1e3:.1f} s, CRT tables (old "
        f"default) {m3 * old / 1e3:.1f} s, short CRT tables (new default) "
        f"{m3 * new / 1e3:.1f} s\n"
        f"  saving per epoch: {m3 * (old - new) / 1e3:.1f} s of one core against the old "
        f"default ({1 - new / old:.0%}), {m3 * (crt - new) / 1e3:.1f} s against CRT r^n"
    )


if __name__ == "__main__":
    main()
