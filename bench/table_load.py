"""A whole `vfl run` job as a user meets it, over a large table: wall time, the job's own
seconds and PSI seconds, and the largest process's peak RSS, for the table as CSV and as
Parquet.

    python -m bench.table_load --rows 1000000 [--epochs 1] [--formats csv,parquet]
                               [--vfl .venv/bin/vfl]

The table is bench/credit_data.py's credit shape (bank: id, y and 13 features; shop: id
and 10 features), written at run time. The job spec is the smallest one (the parties,
`protocol: split`, the epochs, everything else default). `--vfl` may name another
checkout's command (one without Parquet: `--formats csv`), so one run of this script
compares two versions on the same files.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from bench.credit_data import credit_tables
from bench.jobs import job_spec


def as_parquet(csv: Path) -> Path:
    """The same table as a Parquet file beside it (every column as the CSV reader types it)."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    out = csv.with_suffix(".parquet")
    options = pacsv.ConvertOptions(column_types={"id": "string"})
    pq.write_table(pacsv.read_csv(csv, convert_options=options), out)
    return out


def job_yaml(tables: dict[str, Path], epochs: int) -> dict:
    fmt = "parquet" if tables["bank"].suffix == ".parquet" else "csv"
    return job_spec(
        f"table-load-{fmt}",
        "split",
        {"path": str(tables["bank"]), "label": "y", "id": "id", "format": fmt},
        {"path": str(tables["shop"]), "id": "id", "format": fmt},
        train={"epochs": epochs},
    )


def run(vfl: str, spec: dict, folder: Path) -> dict:
    """One `vfl run --json`: its result, the wall seconds, and the peak RSS of the largest
    of its processes (`wait4`: the command and the daemons it waited for)."""
    path = folder / f"{spec['job']}.yaml"
    path.write_text(yaml.safe_dump(spec))
    started = time.monotonic()
    out, err = path.with_suffix(".out"), path.with_suffix(".err")
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = subprocess.Popen([vfl, "run", str(path), "--json"], stdout=stdout, stderr=stderr)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"vfl run failed:\n{err.read_text()[-3000:]}")
    return {**json.loads(out.read_text()), "wall": wall, "peak_mb": usage.ru_maxrss / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.table_load", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--formats", default="csv,parquet")
    parser.add_argument("--vfl", default=str(Path(sys.executable).parent / "vfl"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        sources = credit_tables(folder, args.rows)
        csv = {p: Path(s.path) for p, s in sources.items()}
        print(f"{args.rows} rows, split, {args.epochs} epoch(s), {args.vfl}")
        print("| format | wall s | job s | psi s | AUC | largest process peak RSS MB |")
        print("|---|---|---|---|---|---|")
        for fmt in args.formats.split(","):
            tables = csv if fmt == "csv" else {p: as_parquet(c) for p, c in csv.items()}
            r = run(args.vfl, job_yaml(tables, args.epochs), folder)
            auc = r.get("metrics", {}).get("auc", float("nan"))
            print(
                f"| {fmt} | {r['wall']:.1f} | {r['seconds']:.1f} | "
                f"{r.get('psi_seconds', float('nan')):.1f} | {auc:.4f} | {r['peak_mb']:.0f} |"
            )


if __name__ == "__main__":
    main()
