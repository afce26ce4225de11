"""Secure (blindfl) vs plaintext (split) epoch time on a9a, through real `vfl run` jobs.

    python bench/secure_epoch.py [--epochs 1] [--key-bits 2048] [--out r.json]

Both jobs are the same logistic regression (source out_dim 1, no hidden top layer, batch
256, the a9a.guest / a9a.host vertical split, tested on a9a.t), run as `vfl run` does it:
a coordinator and two party daemons as processes, gRPC with mutual TLS on loopback, all
on this machine's cores (so the two parties' Paillier work competes for them, which a
deployment with one machine per party would not). The time is the trainer's own
training clock (validation excluded) at the end of the last epoch.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from coordinator.cli.progress import follow
from coordinator.local import run_local
from coordinator.spec import parse_spec

A9A = Path(os.environ.get("VFL_SHARED_DATA", "/work/shared/data")) / "a9a"
ROWS_PER_EPOCH = 32_561
BATCH = 256


def _party(party_id: str, role: str, side: str) -> dict:
    data = {
        "path": str(A9A / f"a9a.{side}"),
        "test_path": str(A9A / f"a9a.t.{side}"),
        "format": "libsvm",
    }
    return {
        "id": party_id,
        "role": role,
        "data": {**data, **({"label": "y"} if role == "active" else {})},
    }


def job_spec(protocol: str, epochs: int, key_bits: int) -> dict:
    rounds = -(-ROWS_PER_EPOCH // BATCH) * epochs
    return {
        "job": f"a9a-{protocol}",
        "parties": [_party("bank", "active", "guest"), _party("shop", "passive", "host")],
        "protocol": protocol,
        "crypto": {"key_bits": key_bits, "allow_insecure_test_keys": key_bits < 2048},
        "model": {"source": {"out_dim": 1, "lr": 1.0}, "top": {"hidden": [], "task": "binary"}},
        "train": {"epochs": epochs, "batch_size": BATCH, "lr": 0.1},
        "validation": {"every": rounds},
    }


def run(protocol: str, epochs: int, key_bits: int) -> dict:
    view = run_local(parse_spec(job_spec(protocol, epochs, key_bits)), lambda c, j: follow(c, j))
    if view.state != "SUCCEEDED":
        raise SystemExit(f"{protocol} job failed: {view.reason}")
    result = view.to_plain()
    seconds = result["history"][-1]["train_seconds"]
    return {
        "seconds": seconds,
        "seconds_per_epoch": seconds / epochs,
        "seconds_per_round": seconds / result["rounds"],
        "rounds": result["rounds"],
        "test_auc": result["metrics"]["auc"],
        "bytes_sent": result.get("bytes_sent"),
    }


def obfuscator_floor(key_bits: int, rounds: int) -> float:
    """Seconds per epoch that m3's obfuscators alone need on this machine's cores.

    Every round the active party encrypts [[eta G]] for all 256 rows, one ciphertext per
    row (X_A^T [[eta G]] needs each row's G on its own), so it needs 256 fresh uniform
    r^n for its own key, the cheapest kind (CRT tables, `secure.paillier.fixed_base`).
    """
    from secure.config import SecureConfig
    from secure.paillier.keys import generate_keypair
    from secure.paillier.obfuscators import ObfuscatorPool

    config = SecureConfig(key_bits=key_bits, allow_insecure_test_keys=key_bits < 2048)
    keys = generate_keypair("bank", config)
    pool = ObfuscatorPool(keys.public, keys.private, 0, 1, False, "fixed-base")
    pool.prepare()
    start = time.perf_counter()
    pool.compute(512)
    per_item = (time.perf_counter() - start) / 512
    return rounds * BATCH * per_item / (os.cpu_count() or 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--key-bits", type=int, default=2048)
    ap.add_argument("--out", type=Path, help="write results as JSON")
    args = ap.parse_args()
    results = {p: run(p, args.epochs, args.key_bits) for p in ("split", "blindfl")}
    ratio = results["blindfl"]["seconds"] / results["split"]["seconds"]
    print(f"\na9a, {args.epochs} epoch(s), batch {BATCH}, {args.key_bits}-bit keys, `vfl run`")
    print("| protocol | s/epoch | ms/round | test AUC |")
    print("|---|---|---|---|")
    for name, r in results.items():
        print(
            f"| {name} | {r['seconds_per_epoch']:.2f} | {1e3 * r['seconds_per_round']:.1f} "
            f"| {r['test_auc']:.4f} |"
        )
    print(f"secure / plaintext epoch time: {ratio:.1f}x (target <= 10x)")
    floor = obfuscator_floor(args.key_bits, results["blindfl"]["rounds"] // args.epochs)
    print(
        f"floor: m3's {BATCH} own-key obfuscators per round alone take {floor:.1f} s per epoch "
        f"on {os.cpu_count()} cores = {floor / results['split']['seconds_per_epoch']:.1f}x "
        "the plaintext epoch"
    )
    print(f"load average: {os.getloadavg()[0]:.1f}")
    if args.out:
        args.out.write_text(json.dumps({**results, "ratio": ratio}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
