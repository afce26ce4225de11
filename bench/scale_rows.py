"""Rows at scale: whole `split` jobs of millions of rows through `vfl run`, each party
daemon's peak memory, and the floor each stage could reach.

    python -m bench.scale_rows [--rows 1000000,3000000,10000000] [--formats csv]
                               [--blindfl-rows 0] [--key-bits 2048] [--json FILE]

The tables are bench/credit_data.py's credit shape (bank: id, y and 13 features; shop: id
and 10 features) at the asked size, written a million rows at a time. The job spec is
the smallest one (the parties, the protocol, one epoch; everything else default), as a
user would write it. Per run:

- load s: each party's `read dataset` log line (reading and typing its file), the
  larger of the two; floor: pyarrow streaming the two files once in this process.
- PSI s: the job's; floor: 4 n X25519 multiplications (each party blinds its own set
  and the other's) at this machine's measured cost, over its 2 cores.
- epoch s: training time of the one epoch (without validation); floor (split): the same
  models' forward and backward passes over the same batches in one process, no messages
  (blindfl's floor is bench/secure_epoch.py's).
- peak RSS per party: the daemon process's high-water mark (VmHWM), and of its whole
  process tree (with its PSI worker processes), sampled every second.
- bytes per cell: the larger daemon peak over the table's cells (rows x columns, ids
  and label included).

`--blindfl-rows N` adds one `blindfl` epoch of N rows (2048-bit keys unless
`--key-bits`). The projection of a 1e7-row `blindfl` epoch on a Ray cluster uses the
Paillier operation counts of the measured epoch scaled by rows, and bench/scale_out.py's
rates (bench/results/scale_out.txt).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml
from vfl.contract.spec import TableSource

from bench import jobs
from bench.credit_data import BANK_FEATURES, SHOP_FEATURES, write_credit_tables
from bench.procs import children, descendants
from bench.psi import x25519_microseconds

CORES = os.cpu_count() or 1
PARTIES = ("bank", "shop")
READ_LINE = re.compile(r"read dataset \S+: (\d+) rows in ([\d.]+) s")
LOG_STAMP = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) ")


def kept_tables(folder: Path, rows: int, fmt: str) -> dict:
    """The tables of `rows` rows in `fmt` under `folder`, written on first use."""
    where = folder / f"{rows}-{fmt}"
    done = where / "done"
    if not done.exists():
        where.mkdir(parents=True, exist_ok=True)
        write_credit_tables(where, rows, fmt)
        done.touch()
    return {
        "bank": TableSource(path=str(where / f"bank.{fmt}"), format=fmt, id="id", label="y"),
        "shop": TableSource(path=str(where / f"shop.{fmt}"), format=fmt, id="id"),
    }


def job_spec(tables: dict, protocol: str, key_bits: int) -> dict:
    fmt = tables["bank"].format
    return jobs.job_spec(
        f"scale-{protocol}",
        protocol,
        {"path": tables["bank"].path, "label": "y", "format": fmt},
        {"path": tables["shop"].path, "format": fmt},
        key_bits=key_bits if protocol == "blindfl" else None,
        train={"epochs": 1},
    )


class Sampler:
    """Polls the party daemons under `vfl run` (`pid`): each one's VmHWM and the peak
    RSS of its process tree; `timeline` holds every sample (wall clock, party, the
    daemon's RSS and its tree's, in KiB)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.hwm = dict.fromkeys(PARTIES, 0)
        self.tree = dict.fromkeys(PARTIES, 0)
        self.timeline: list[tuple[float, str, int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(1.0):  # VmHWM is exact; the tree's peak is sampled
            for pid in children(self.pid):
                party = _party_of(pid)
                if party is None:
                    continue
                self.hwm[party] = max(self.hwm[party], _status_kb(pid, "VmHWM"))
                tree = sum(_status_kb(p, "VmRSS") for p in descendants(pid))
                self.tree[party] = max(self.tree[party], tree)
                self.timeline.append((time.time(), party, _status_kb(pid, "VmRSS"), tree))


def _party_of(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmd = fh.read().decode(errors="replace")
    except OSError:
        return None
    return next((p for p in PARTIES if f"party-{p}.yaml" in cmd), None)


def _status_kb(pid: int, field: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def run_job(spec: dict, folder: Path, trace: Path | None = None) -> dict:
    """One `vfl run --json --workdir`: its result, wall seconds, memory and load seconds;
    `trace`: also write each party's memory over time beside its log lines there."""
    work = folder / f"work-{spec['job']}"
    path = folder / f"{spec['job']}.yaml"
    path.write_text(yaml.safe_dump(spec))
    vfl = str(Path(sys.executable).parent / "vfl")
    started = time.monotonic()
    out, err = path.with_suffix(".out"), path.with_suffix(".err")
    with out.open("w") as stdout, err.open("w") as stderr:
        cmd = [vfl, "run", str(path), "--json", "--workdir", str(work)]
        proc = subprocess.Popen(cmd, stdout=stdout, stderr=stderr)
        sampler = Sampler(proc.pid)
        proc.wait()
        sampler.stop()
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"vfl run failed:\n{err.read_text()[-3000:]}")
    result = json.loads(out.read_text())
    if trace is not None:
        write_trace(trace, sampler.timeline, work)
    loads = []
    for party in PARTIES:
        log = (work / f"party-{party}.log").read_text()
        loads += [float(m.group(2)) for m in READ_LINE.finditer(log)]
    return {
        "result": result,
        "wall": wall,
        "load_s": max(loads, default=float("nan")),
        "hwm_mb": {p: kb / 1024 for p, kb in sampler.hwm.items()},
        "tree_mb": {p: kb / 1024 for p, kb in sampler.tree.items()},
    }


def write_trace(path: Path, timeline: list, work: Path) -> None:
    """Each party's memory samples and log lines in time order, seconds from the first
    sample: where in the job a party's memory goes."""
    lines = [
        (t, f"{party:5} rss {rss / 1024:7.0f} MB  tree {tree / 1024:7.0f} MB")
        for t, party, rss, tree in timeline
    ]
    for party in PARTIES:
        for line in (work / f"party-{party}.log").read_text().splitlines():
            stamp = LOG_STAMP.match(line)
            if stamp:
                when = time.mktime(time.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S"))
                lines.append(
                    (when + int(stamp.group(2)) / 1000, f"{party:5} log {line[24:][:150]}")
                )
    start = min((t for t, _ in lines), default=0.0)
    path.write_text("".join(f"{t - start:8.1f}  {text}\n" for t, text in sorted(lines)))


def load_floor(tables: dict) -> float:
    """Seconds pyarrow takes to stream both files once (parse and type, nothing kept)."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    tick = time.perf_counter()
    for source in tables.values():
        if source.format == "parquet":
            for _ in pq.ParquetFile(source.path).iter_batches(batch_size=1 << 17):
                pass
        else:
            options = pacsv.ConvertOptions(column_types={"id": "string"})
            for _ in pacsv.open_csv(source.path, convert_options=options):
                pass
    return time.perf_counter() - tick


def epoch_floor(rows: int, batch: int = 256, out_dim: int = 16, hidden: int = 32) -> float:
    """Seconds of the split model's forward and backward passes over one epoch's training
    batches (80% of `rows`) in one process: both bottom layers and the top MLP, Adam."""
    import torch

    torch.manual_seed(0)
    bank, shop = torch.nn.Linear(BANK_FEATURES, out_dim), torch.nn.Linear(SHOP_FEATURES, out_dim)
    top = torch.nn.Sequential(
        torch.nn.Linear(2 * out_dim, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1)
    )
    params = [*bank.parameters(), *shop.parameters(), *top.parameters()]
    optimiser = torch.optim.Adam(params)
    xa, xb = torch.randn(batch, BANK_FEATURES), torch.randn(batch, SHOP_FEATURES)
    y = (torch.rand(batch, 1) > 0.5).float()
    batches = int(rows * 0.8) // batch
    sample = min(batches, 2000)
    tick = time.perf_counter()
    for _ in range(sample):
        optimiser.zero_grad()
        out = top(torch.cat([bank(xa), shop(xb)], dim=1))
        torch.nn.functional.binary_cross_entropy_with_logits(out, y).backward()
        optimiser.step()
    return (time.perf_counter() - tick) * batches / sample


def ray_projection(rows: int, key_bits: int, sample: int = 30_000) -> list[str]:
    """A `blindfl` epoch of `rows` credit rows on a Ray cluster of 16, 64 and 256 cores:
    the MatMul layer's operations (bench/floor.py's counts over `sample` rows, scaled by
    rows) times the one-core costs and Ray's per-task overhead that bench/scale_out.py
    measured (bench/results/scale_out.txt), as scale_out.py projects them."""
    from bench.scale_out import workload

    text = (Path(__file__).parent / "results" / "scale_out.txt").read_text()
    one = re.search(r"\| 1 process \| ([\d,]+) \| ([\d,]+) \| ([\d,]+) \|", text)
    ray = re.search(r"Ray: ([\d.]+) ms", text)
    if one is None or ray is None:
        return ["no projection: bench/results/scale_out.txt lacks its rates"]
    rate = {
        k: float(v.replace(",", ""))
        for k, v in zip(("dec", "rr", "prod"), one.groups(), strict=True)
    }
    o = float(ray.group(1)) * 1e-3
    costs = {k: 1 / r + o / max(1, math.ceil(10 * o * r)) for k, r in rate.items()}
    counts = workload(sample, True, key_bits)
    k = rows / sample
    work = k * (
        counts.decryptions * costs["dec"]
        + (counts.obfuscators + counts.fresh) * costs["rr"]
        + counts.products * costs["prod"]
    )
    return [
        f"projection of a {rows:,}-row blindfl epoch on a Ray cluster ({key_bits}-bit; the "
        f"MatMul layer's operations of {sample:,} rows x {k:,.0f}, at scale_out.txt's one-core "
        f"rates and Ray's {o * 1e3:.2f} ms per task): {work:,.0f} core-s",
        "  " + ", ".join(f"{c} cores: {work / c / 60:,.1f} min" for c in (16, 64, 256)),
        "  (the work's floor: no round trips or serial steps; the measured epoch above is "
        "this machine's run against its own floor)",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.scale_rows", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--rows", default="1000000,3000000,10000000")
    parser.add_argument("--formats", default="csv")
    parser.add_argument("--blindfl-rows", type=int, default=0)
    parser.add_argument("--key-bits", type=int, default=2048)
    parser.add_argument("--json", help="also write every measurement to this file")
    parser.add_argument(
        "--project", type=int, default=10_000_000, help="rows of the Ray projection (0: none)"
    )
    parser.add_argument("--trace", help="write each job's memory timeline to DIR/<case>.txt")
    parser.add_argument(
        "--tables", help="keep the generated tables in this folder and reuse them on later runs"
    )
    args = parser.parse_args()
    t_mult = x25519_microseconds() * 1e-6
    print(f"split, 1 epoch, batch 256, {CORES} cores; X25519: {t_mult * 1e6:.1f} us")
    print(
        "| rows | format | load s (floor) | PSI s (floor) | epoch s (floor) | validation s "
        "| job s | AUC | bank peak MB (tree) | shop peak MB (tree) | bytes/cell |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    records = []
    cases = [
        (int(float(r)), f, "split") for r in args.rows.split(",") for f in args.formats.split(",")
    ]
    if args.blindfl_rows:
        cases.append((args.blindfl_rows, args.formats.split(",")[0], "blindfl"))
    for rows, fmt, protocol in cases:
        with tempfile.TemporaryDirectory(dir=os.environ.get("SCALE_TMP")) as tmp:
            folder = Path(tmp)
            tables = kept_tables(Path(args.tables), rows, fmt) if args.tables else None
            tables = tables or write_credit_tables(folder, rows, fmt)
            floors = {
                "load": load_floor(tables),
                "psi": 4 * rows * t_mult / CORES,
                "epoch": epoch_floor(rows) if protocol == "split" else float("nan"),
            }
            trace = Path(args.trace) / f"{rows}-{fmt}-{protocol}.txt" if args.trace else None
            run = run_job(job_spec(tables, protocol, args.key_bits), folder, trace)
        r = run["result"]
        history = r.get("history") or [{}]
        epoch = history[-1].get("train_seconds", float("nan"))
        validation = history[-1].get("seconds", float("nan")) - epoch
        cells = rows * (2 + BANK_FEATURES + 1 + SHOP_FEATURES)
        per_cell = run["hwm_mb"]["bank"] * 2**20 / (rows * (2 + BANK_FEATURES))
        auc = r.get("metrics", {}).get("auc", float("nan"))
        name = "" if protocol == "split" else f" {protocol} {args.key_bits}-bit"
        print(
            f"| {rows:,}{name} | {fmt} | {run['load_s']:.1f} ({floors['load']:.1f}) "
            f"| {r.get('psi_seconds', float('nan')):.1f} ({floors['psi']:.1f}) "
            f"| {epoch:.1f} ({floors['epoch']:.1f}) | {validation:.1f} | {r['seconds']:.1f} "
            f"| {auc:.4f} | {run['hwm_mb']['bank']:.0f} ({run['tree_mb']['bank']:.0f}) "
            f"| {run['hwm_mb']['shop']:.0f} ({run['tree_mb']['shop']:.0f}) | {per_cell:.1f} |",
            flush=True,
        )
        records.append(
            {
                "rows": rows,
                "format": fmt,
                "protocol": protocol,
                "cells": cells,
                "floors": floors,
                "epoch_s": epoch,
                "validation_s": validation,
                **{k: v for k, v in run.items() if k != "result"},
                "result": {k: r.get(k) for k in ("psi_seconds", "seconds", "metrics", "history")},
            }
        )
        if args.json:
            Path(args.json).write_text(json.dumps(records, indent=1))
    print("bytes/cell: the bank daemon's peak over its own cells (ids, label, 13 features)")
    if args.project:
        print("\n".join(ray_projection(args.project, args.key_bits)))


if __name__ == "__main__":
    main()
