"""Throughput of the two-party ECDH PSI over the in-process channel.

    python -m bench.psi [--ids 1000000] [--overlap 0.5] [--workers 0] [--quick]

Both parties run as threads of this process, each with its own process pool, so they
share this machine's cores: a deployment with one machine per party does each side's
work on its own cores. The table shows ids per second per side, the bytes each side
sent, and a per-side projection from the measured cost of one X25519 multiplication.
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import threading
import time

import numpy as np
from vfl.secure.channel import InProcessHub
from vfl.secure.psi.curve import Blinder, hash_to_curve
from vfl.secure.psi.protocol import PsiConfig, PsiResult, run_psi


def cpu_seconds() -> float:
    """CPU seconds of this process and of its reaped children (the pool workers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def x25519_microseconds(count: int = 4000) -> float:
    """Single-thread cost of one scalar multiplication, in microseconds."""
    points = hash_to_curve([str(i).encode() for i in range(count)]).tobytes()
    with Blinder(workers=1) as blinder:
        start = time.process_time()  # CPU time: robust to other load on the machine
        blinder.submit(points).result()
        return (time.process_time() - start) / count * 1e6


def make_ids(n: int, overlap: float) -> tuple[list[str], list[str]]:
    """Two id columns of n ids each, sharing round(n * overlap) ids, in scrambled order."""
    rng = np.random.default_rng(0)
    shift = n - round(n * overlap)
    active = [f"user-{v:09d}" for v in rng.permutation(n).tolist()]
    passive = [f"user-{shift + v:09d}" for v in rng.permutation(n).tolist()]
    return active, passive


def run_two_party(
    n: int, overlap: float, config: PsiConfig
) -> tuple[dict[str, PsiResult], float, dict[str, int]]:
    """Run both sides as threads; returns results, wall seconds and bytes sent per side."""
    ids = dict(zip(("active", "passive"), make_ids(n, overlap), strict=True))
    hub = InProcessHub()
    channels = {party: hub.channel(party) for party in ids}
    results: dict[str, PsiResult | BaseException] = {}

    def side(party: str) -> None:
        try:
            results[party] = run_psi(
                channels[party], party, "active", ["passive"], ids[party], "bench/psi", 0, config
            )
        except BaseException as exc:  # reported below
            results[party] = exc

    threads = [threading.Thread(target=side, args=(party,)) for party in ids]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    done = {party: r for party, r in results.items() if isinstance(r, PsiResult)}
    if len(done) != len(ids):
        raise SystemExit(f"PSI failed: {results}")
    sent = {party: channels[party].stats.bytes_sent for party in ids}
    return done, wall, sent


def print_table(
    n: int,
    results: dict[str, PsiResult],
    wall: float,
    sent: dict[str, int],
    micros: float,
    workers: int,
) -> None:
    print(f"\n{'side':<8} {'ids':>10} {'common':>10} {'seconds':>8} {'ids/s':>10} {'MB sent':>8}")
    for party, result in results.items():
        rate = n / result.seconds
        mb = sent[party] / 1e6
        print(
            f"{party:<8} {n:>10} {result.intersection_size:>10} {result.seconds:>8.1f} "
            f"{rate:>10,.0f} {mb:>8.1f}"
        )
    print(f"\ntotal wall time (both sides on {os.cpu_count()} shared cores): {wall:.1f} s")
    projected = 2 * n * micros / 1e6 / workers
    print(
        f"X25519: {micros:.1f} us per multiplication; each side does 2 x {n} of them, i.e. "
        f"~{projected:.1f} s per side on {workers} dedicated cores"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.psi", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--ids", type=int, default=1_000_000, help="ids per side")
    parser.add_argument("--overlap", type=float, default=0.5, help="share of common ids")
    parser.add_argument("--workers", type=int, default=0, help="processes per side (0: all)")
    parser.add_argument("--quick", action="store_true", help="100000 ids per side")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    n = 100_000 if args.quick else args.ids
    workers = args.workers or os.cpu_count() or 1
    micros = x25519_microseconds()
    cpu_before = cpu_seconds()
    results, wall, sent = run_two_party(n, args.overlap, PsiConfig(workers=workers))
    cpu = cpu_seconds() - cpu_before
    print_table(n, results, wall, sent, micros, workers)
    print(
        f"CPU time of the run, all processes: {cpu:.1f} s, i.e. {cpu / 2:.1f} s per side; "
        f"{cpu / 2 / workers:.1f} s per side on {workers} dedicated cores if perfectly parallel"
    )
    print(f"load average (other work on this machine skews wall times): {os.getloadavg()}")


if __name__ == "__main__":
    main()
