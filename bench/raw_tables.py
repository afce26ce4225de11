"""Validation AUC of tables as organisations hold them: raw amounts, counts, codes, words
and empty cells, against the same rows standardised by hand, through real `vfl run`
jobs (coordinator and both party daemons as processes on loopback) with the smallest job
spec: the parties and their `data:`, the protocol, one epoch and `train.seed`; every other
field default (2048-bit keys unless --key-bits).

    python -m bench.raw_tables                               the results file (2048 bits)
    python -m bench.raw_tables --key-bits 1024 --seeds 0     a quicker look
    python -m bench.raw_tables --only breast criteo --json out.json

Tables (each split between an active "bank", which holds the label, and a passive
"shop"):

    synthetic  bench/raw_data.py: a credit-shaped table, lognormal amounts, ages, status
               codes and counts, a nonlinear label of both parties (--rows, default
               30,000; --data-seed)
    breast     bench/data/breast_raw.csv: scikit-learn's Wisconsin breast-cancer table,
               unscaled (569 rows); the first 15 features at the bank, the other 15 at
               the shop
    criteo     criteo_sample.txt (VFL_SHARED_DATA, default /work/shared/data; 200 rows):
               raw counts with empty cells and hashed string categories; bank: label,
               I1..I7, C1..C13; shop: I8..I13, C14..C26. One epoch of 160 rows is a
               single round: the row says the table trains, not how well

Rows of the table (each party's `data:`):

    standardised by hand (preprocess: none)   every numeric column z-scored over the
        whole table (criteo: empty cells filled with the column mean, strings as integer
        codes declared `categorical:`); `preprocess: none` where the contract knows it
    raw (defaults)             the raw file, no column settings (`preprocess: auto`)
    raw (preprocess: zscore)   the raw file with `preprocess: zscore`
    messy (defaults)           synthetic only: raw plus a words column at each party and
                               about 2% empty cells

A job that fails (a contract without `preprocess:`, a table the reader refuses) shows
as "failed" with its reason under the table. The results file,
bench/results/raw_tables.txt, is written only by a run with the default settings in
which every job succeeded.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shlex
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from vfl.contract.spec import TableColumns, TableSource

from bench import jobs
from bench.raw_data import raw_tables
from bench.table_load import run as vfl_run

BENCH = Path(__file__).resolve().parent
BREAST = BENCH / "data" / "breast_raw.csv"
CRITEO = (
    Path(os.environ.get("VFL_SHARED_DATA", "/work/shared/data"))
    / "criteo_sample"
    / "criteo_sample.txt"
)
RESULTS = BENCH / "results" / "raw_tables.txt"
TABLES = ("synthetic", "breast", "criteo")
PROTOCOLS = ("split", "blindfl")
CASES = {
    "standardised": "standardised by hand (preprocess: none)",
    "raw": "raw (defaults)",
    "zscore": "raw (preprocess: zscore)",
    "messy": "messy (defaults)",
}
# Whether this checkout's contract has the `preprocess:` field yet. Without it the
# hand-standardised tables run as they are (today's behaviour is `preprocess: none`).
HAS_PREPROCESS = "preprocess" in TableColumns.model_fields
DEFAULTS = {"rows": 30_000, "seeds": [0, 1, 2], "key_bits": 2048, "epochs": None, "data_seed": 0}

# A daemon's log line as `vfl run` relays it: "party-shop: <date> <time> WARNING [job ...]
# vfl.party.daemon: party shop: failed: ..." -> "party shop: failed: ...".
LOG_PREFIX = re.compile(r"^\S+: \d{4}-\d\d-\d\d [\d:,]+ [A-Z]+ (\[job [^\]]*\] )?[\w.]+: ")
Data = dict[str, dict]  # party id -> its `data:` in the job spec


def _data(table: TableSource, preprocess: str | None) -> dict:
    """A party's `data:`: the path, id and label, `categorical:` if any, `preprocess:`."""
    data: dict = {"path": table.path, "id": table.id}
    if table.label:
        data["label"] = table.label
    if table.categorical:
        data["categorical"] = list(table.categorical)
    if preprocess is not None:
        data["preprocess"] = preprocess
    return data


def _preprocess(case: str) -> str | None:
    if case == "zscore":
        return "zscore"
    if case == "standardised" and HAS_PREPROCESS:
        return "none"
    return None  # the default (auto once the contract has it)


# --- the tables ------------------------------------------------------------------------


def _read_csv(path: Path) -> tuple[list[str], list[list[str]]]:
    with path.open(newline="") as fh:
        rows = list(csv.reader(fh))
    return rows[0], rows[1:]


def _write_csv(path: Path, header: list[str], columns: list[list[str]]) -> None:
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(zip(*columns, strict=True))


def _zscored(cells: list[str]) -> list[str]:
    """A numeric column z-scored over the whole table, empty cells first filled with the
    mean of the others (so they become 0)."""
    present = np.array([float(c) for c in cells if c != ""])
    mean, std = present.mean(), present.std() or 1.0
    return [f"{(float(c) - mean) / std if c != '' else 0.0:.6f}" for c in cells]


def _codes(cells: list[str]) -> list[str]:
    """A string column as integer codes: 0 for an empty cell, 1.. in sorted order."""
    vocabulary = {v: i + 1 for i, v in enumerate(sorted({c for c in cells if c != ""}))}
    return [str(vocabulary.get(c, 0)) for c in cells]


def _split(
    folder: Path,
    header: list[str],
    rows: list[list[str]],
    label: str,
    bank: list[str],
    shop: list[str],
    hand: bool,
    strings: frozenset[str] = frozenset(),
) -> dict[str, TableSource]:
    """Write bank.csv (id, label, `bank` columns) and shop.csv (id, `shop` columns) from
    `rows`, cells as they are or (`hand`) standardised by hand: numeric columns z-scored,
    `strings` as integer codes declared categorical."""
    cells = {name: [r[j] for r in rows] for j, name in enumerate(header)}
    ids = [str(i) for i in range(len(rows))]
    out = {}
    for party, names in (("bank", [label, *bank]), ("shop", shop)):
        columns = []
        for name in names:
            column = cells[name]
            if hand and name != label:
                column = _codes(column) if name in strings else _zscored(column)
            columns.append(column)
        path = folder / f"{party}.csv"
        _write_csv(path, ["id", *names], [ids, *columns])
        categorical = tuple(n for n in names if n in strings) if hand else ()
        out[party] = TableSource(
            path=str(path),
            label=label if party == "bank" else None,
            categorical=categorical,
        )
    return out


def breast_tables(folder: Path, case: str) -> dict[str, TableSource]:
    header, rows = _read_csv(BREAST)
    features = header[2:]
    rows = [r[1:] for r in rows]  # the split files number the rows again
    hand = case == "standardised"
    return _split(folder, header[1:], rows, "y", features[:15], features[15:], hand)


def criteo_tables(folder: Path, case: str) -> dict[str, TableSource]:
    header, rows = _read_csv(CRITEO)
    ints = [f"I{i}" for i in range(1, 14)]
    cats = [f"C{i}" for i in range(1, 27)]
    bank, shop = ints[:7] + cats[:13], ints[7:] + cats[13:]
    hand = case == "standardised"
    return _split(folder, header, rows, "label", bank, shop, hand, frozenset(cats))


def synthetic_tables(folder: Path, case: str, args: argparse.Namespace) -> dict[str, TableSource]:
    variant = {"standardised": "standardised", "messy": "messy"}.get(case, "raw")
    return raw_tables(folder, args.rows, args.data_seed, variant)


def cases(table: str, only: list[str] | None = None) -> tuple[str, ...]:
    """The rows of `table`'s results (of `only`, if given)."""
    rows = tuple(CASES) if table == "synthetic" else ("standardised", "raw", "zscore")
    return tuple(c for c in rows if only is None or c in only)


def tables_for(table: str, args: argparse.Namespace) -> Callable[[Path, str], dict]:
    if table == "synthetic":
        return lambda folder, case: synthetic_tables(folder, case, args)
    return breast_tables if table == "breast" else criteo_tables


def describe(table: str, args: argparse.Namespace) -> str:
    if table == "synthetic":
        return (
            f"synthetic (bench/raw_data.py): {args.rows:,} rows, data seed {args.data_seed}; "
            "bank 8 + shop 5 numeric columns; messy: + a words column each, ~2% empty cells"
        )
    if table == "breast":
        return "breast (bench/data/breast_raw.csv): 569 rows, 15 + 15 unscaled features"
    return "criteo (criteo_sample.txt): 200 rows; bank I1..I7 C1..C13, shop I8..I13 C14..C26"


# --- the jobs --------------------------------------------------------------------------


def job_spec(name: str, protocol: str, data: Data, seed: int, args: argparse.Namespace) -> dict:
    """The smallest spec: parties and data, protocol and seed (and test keys)."""
    # every other field default (epochs: the spec's 3)
    spec = jobs.job_spec(name, protocol, data["bank"], data["shop"], train={"seed": seed})
    if args.epochs is not None:
        spec["train"]["epochs"] = args.epochs
    if protocol == "blindfl" and args.key_bits != 2048:
        spec["crypto"] = {k: v for k, v in jobs.crypto(args.key_bits).items() if v}
    return spec


def one_job(
    table: str, case: str, protocol: str, seed: int, args: argparse.Namespace
) -> tuple[float | None, str | None]:
    """(validation AUC, None) or (None, why the job failed)."""
    with tempfile.TemporaryDirectory(prefix="vfl-raw-tables-") as tmp:
        folder = Path(tmp)
        sources = tables_for(table, args)(folder, case)
        data = {p: _data(t, _preprocess(case)) for p, t in sources.items()}
        spec = job_spec(f"{table}-{case}-{protocol}-{seed}", protocol, data, seed, args)
        try:
            result = vfl_run(args.vfl, spec, folder)
        except SystemExit as failed:
            return None, _reason(str(failed))
    auc = result.get("metrics", {}).get("auc")
    if auc is None or not np.isfinite(auc):
        return None, f"no finite validation AUC (metrics: {result.get('metrics')})"
    return float(auc), None


def _reason(message: str) -> str:
    """What a failed `vfl run`'s error output says went wrong: the first line that says a
    party or job failed (not that its report went undelivered), else the last line."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith(("vfl run failed", "Traceback"))]
    said = [line for line in lines if "failed: " in line and "not delivered" not in line]
    last = said[0] if said else lines[-1] if lines else message
    return LOG_PREFIX.sub("", last)[:300]


def table_lines(table: str, results: dict, args: argparse.Namespace) -> list[str]:
    lines = [describe(table, args)]
    lines.append("| rows | split AUC | split runs | blindfl AUC | blindfl runs |")
    lines.append("|---|---|---|---|---|")
    notes: list[str] = []
    for case in cases(table, args.cases):
        cells = [CASES[case]]
        for protocol in PROTOCOLS:
            runs = results[case][protocol]
            aucs = [r["auc"] for r in runs if r["auc"] is not None]
            failed = [r for r in runs if r["auc"] is None]
            mean = f"{np.mean(aucs):.4f}" if aucs else "failed"
            if aucs and failed:
                mean += f" ({len(aucs)} of {len(runs)})"
            shown = [f"{r['auc']:.4f}" if r["auc"] is not None else "failed" for r in runs]
            cells += [mean, " ".join(shown)]
            for r in failed[:1]:
                notes.append(f"- {CASES[case]}, {protocol}, seed {r['seed']}: {r['error']}")
        lines.append("| " + " | ".join(cells) + " |")
    return lines + notes


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.raw_tables", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--only", nargs="+", choices=TABLES, default=list(TABLES))
    parser.add_argument("--seeds", type=int, nargs="+", default=DEFAULTS["seeds"])
    parser.add_argument("--key-bits", type=int, default=DEFAULTS["key_bits"])
    parser.add_argument("--rows", type=int, default=DEFAULTS["rows"], help="synthetic rows")
    parser.add_argument("--data-seed", type=int, default=DEFAULTS["data_seed"])
    parser.add_argument("--epochs", type=int, default=DEFAULTS["epochs"])
    parser.add_argument("--cases", nargs="+", choices=CASES, help="some rows only")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--vfl", default=str(Path(sys.executable).parent / "vfl"))
    args = parser.parse_args()
    if args.key_bits < 2048 and args.key_bits != 1024:
        parser.error("--key-bits: 2048 or more, or 1024 (an insecure test key)")
    command = "# python -m bench.raw_tables " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    out = [command.rstrip()]
    out.append(
        f"validation AUC after {args.epochs or 'the default 3'} epoch(s), smallest spec, "
        f"{args.key_bits}-bit keys "
        f"(blindfl), train.seed {' '.join(map(str, args.seeds))}; mean, then each run"
        + ("" if HAS_PREPROCESS else "; this contract has no `preprocess:` yet")
    )
    print("\n".join(out), flush=True)
    results: dict[str, dict] = {}
    for table in args.only:
        if table == "criteo" and not CRITEO.exists():
            print(f"\n(criteo skipped: {CRITEO} is missing)", flush=True)
            continue
        results[table] = {}
        for case in cases(table, args.cases):
            results[table][case] = {}
            for protocol in PROTOCOLS:
                runs = results[table][case][protocol] = []
                for seed in args.seeds:
                    started = time.monotonic()
                    auc, error = one_job(table, case, protocol, seed, args)
                    runs.append({"seed": seed, "auc": auc, "error": error})
                    took = time.monotonic() - started
                    shown = f"{auc:.4f}" if auc is not None else f"failed: {error}"
                    print(
                        f"  {table} {case} {protocol} seed {seed}: {shown} ({took:.0f} s)",
                        file=sys.stderr,
                        flush=True,
                    )
        lines = ["", *table_lines(table, results[table], args)]
        print("\n".join(lines), flush=True)
        out += lines
    if args.json:
        settings = {k: getattr(args, k) for k in DEFAULTS} | {"only": args.only}
        args.json.write_text(json.dumps({"settings": settings, "results": results}, indent=1))
    failed = any(
        r["auc"] is None
        for by_case in results.values()
        for by_protocol in by_case.values()
        for runs in by_protocol.values()
        for r in runs
    )
    real = (
        all(getattr(args, k) == v for k, v in DEFAULTS.items())
        and args.only == list(TABLES)
        and args.cases is None
    )
    if real and not failed:
        RESULTS.write_text("\n".join(out) + "\n")
        print(f"\nwritten to {RESULTS.relative_to(BENCH.parent)}")
    else:
        why = "a job failed" if failed else "not the default settings"
        print(f"\n({why}: {RESULTS.relative_to(BENCH.parent)} not written)")


if __name__ == "__main__":
    sys.exit(main())
