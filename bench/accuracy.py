"""Validation AUC of `protocol: blindfl` against `split` with default settings, through
real `vfl run` jobs (coordinator and both party daemons as processes on loopback).

    python -m bench.accuracy                         every data set, 1024-bit test keys
    python -m bench.accuracy --only sparse breast    some of them
    python -m bench.accuracy --json out.json         also write the table as JSON
    python -m bench.accuracy --only credit --seeds 0 1 2 3 --job-seeds 100 101
                                                     several data sets and initialisations
    python -m bench.accuracy --only credit --scheme bfv   blindfl over BFV (crypto.scheme)

Data sets (each split between an active "bank" and a passive "shop"):

    credit  bench/credit_data.py: 13 + 10 dense standardised features, nonlinear label
            (--credit-rows, default 30,000), 20% held out
    breast  FATE's breast data (cli/data), 20% held out
    sparse  bench/sparse_data.py: 150 + 150 binary features, ~3% positives (--sparse-rows,
            default 20,000), 20% held out
    a9a     the a9a.guest / a9a.host split, validated on the a9a.t test rows
            (VFL_SHARED_DATA, default /work/shared/data)
    a9a3    a9a with the positive rows subsampled to ~3% (bench/a9a_data.py; the data
            seed draws them), in the training and the test rows alike

Every job uses the default spec (source out_dim 16, top [32], batch 256, lr 0.05,
adagrad) except a9a's and a9a3's `out_dim: 1, top: []` (logistic regression); it
validates after every epoch. The keys are small test keys (--key-bits): the model and
its accuracy do not depend on the key size, only the time does. Printed: the AUC after
epoch 1 and after the last epoch (--epochs, default 3) for split and blindfl, and the
differences blindfl - split.

`--seeds` draws the synthetic data (credit, sparse) and a9a3's positives anew per seed;
`--job-seeds` sets the jobs' `train.seed` (initial weights, shares and batch order), the
data seed when not given. With more than one run per data set a summary line gives the
mean difference and the worst single run: on data whose label needs an interaction
between the parties' features the epoch at which training leaves a plateau depends on
the initial weights, for split as for blindfl, so one run's difference says little
(docs/protocols.md §4).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
from vfl.cli.progress import follow
from vfl.contract.spec import TableSource, parse_spec
from vfl.local.run import run_local

from bench import jobs
from bench.a9a_data import a9a3_tables
from bench.credit_data import credit_tables
from bench.sparse_data import sparse_tables

REPO = Path(__file__).resolve().parent.parent
FATE = REPO / "cli" / "data"
A9A = Path(os.environ.get("VFL_SHARED_DATA", "/work/shared/data")) / "a9a"
BATCH = 256
DATASETS = ("credit", "breast", "sparse", "a9a", "a9a3")
SEEDED = ("credit", "sparse", "a9a3")  # the seed draws the data
LOGISTIC = ("a9a", "a9a3")  # out_dim 1, no hidden top layer: logistic regression
TESTED = ("a9a", "a9a3")  # validated on their own test rows


def _data(table: TableSource, test: str | None = None) -> dict:
    data = {"path": table.path, "format": table.format, "id": table.id}
    if table.label:
        data["label"] = table.label
    if test is not None:
        data["test_path"] = test
    return data


def _tables(name: str, folder: Path, args: argparse.Namespace) -> tuple[dict, int]:
    """Each party's `data:` and the number of training rows."""
    if name == "credit":
        tables = credit_tables(folder, args.credit_rows, args.seed)
        return {p: _data(t) for p, t in tables.items()}, args.credit_rows
    if name == "sparse":
        tables = sparse_tables(folder, args.sparse_rows, args.seed)
        return {p: _data(t) for p, t in tables.items()}, args.sparse_rows
    if name == "breast":
        bank = TableSource(path=str(FATE / "breast_hetero_guest.csv"), label="y")
        shop = TableSource(path=str(FATE / "breast_hetero_host.csv"))
        return {"bank": _data(bank), "shop": _data(shop)}, 569
    if name == "a9a3":
        tables = a9a3_tables(folder, args.seed)
        data = {p: _data(table, test) for p, (table, test) in tables.items()}
        return data, sum(1 for _ in open(tables["bank"][0].path))
    svm = {"format": "libsvm"}
    bank = TableSource(path=str(A9A / "a9a.guest"), label="y", **svm)
    shop = TableSource(path=str(A9A / "a9a.host"), **svm)
    return {
        "bank": _data(bank, str(A9A / "a9a.t.guest")),
        "shop": _data(shop, str(A9A / "a9a.t.host")),
    }, 32_561


def job_spec(name: str, protocol: str, data: dict, rows: int, args: argparse.Namespace) -> dict:
    held_out = 0 if name in TESTED else round(rows * 0.2)
    per_epoch = -(-(rows - held_out) // BATCH)
    spec = jobs.job_spec(
        f"{name}-{protocol}",
        protocol,
        data["bank"],
        data["shop"],
        key_bits=args.key_bits,
        model=jobs.binary_model(1, []) if name in LOGISTIC else None,
        train={"epochs": args.epochs, "seed": args.job_seed},
        validation={"every": per_epoch},
    )
    spec["crypto"]["scheme"] = args.scheme if protocol == "blindfl" else "paillier"
    return spec


def run(name: str, protocol: str, args: argparse.Namespace) -> list[float]:
    """The validation AUC after each epoch."""
    with tempfile.TemporaryDirectory(prefix="vfl-accuracy-") as folder:
        data, rows = _tables(name, Path(folder), args)
        spec = parse_spec(job_spec(name, protocol, data, rows, args))
        view = run_local(spec, lambda c, j: follow(c, j, show=False))
    if view.state != "SUCCEEDED":
        raise SystemExit(f"{name} {protocol} job failed: {view.reason}")
    history = view.to_plain()["history"]
    return [round(float(entry["auc"]), 4) for entry in history][: args.epochs]


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.accuracy", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--only", nargs="+", choices=DATASETS, default=list(DATASETS))
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="data seeds")
    parser.add_argument(
        "--job-seeds", type=int, nargs="+", help="train.seed (default: the data seed)"
    )
    parser.add_argument("--key-bits", type=int, default=1024)
    parser.add_argument("--scheme", choices=("paillier", "bfv"), default="paillier")
    parser.add_argument("--credit-rows", type=int, default=30_000)
    parser.add_argument("--sparse-rows", type=int, default=20_000)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    last = args.epochs
    print(f"validation AUC, default spec, {args.key_bits}-bit test keys")
    print(f"{'data':8} {'seed':>4} {'job':>4} ", end="")
    print(f"{'split@1':>8} {'blind@1':>8} {'diff@1':>7}  ", end="")
    print(f"{'split@' + str(last):>8} {'blind@' + str(last):>8} {'diff@' + str(last):>7}")
    results: dict[str, list[dict]] = {}
    for name in args.only:
        runs = results.setdefault(name, [])
        for seed in args.seeds if name in SEEDED else args.seeds[:1]:
            for job_seed in args.job_seeds or [seed]:
                this = argparse.Namespace(**{**vars(args), "seed": seed, "job_seed": job_seed})
                split, blind = run(name, "split", this), run(name, "blindfl", this)
                runs.append({"seed": seed, "job_seed": job_seed, "split": split, "blindfl": blind})
                print(
                    f"{name:8} {seed:4} {job_seed:4} {split[0]:8.4f} {blind[0]:8.4f} "
                    f"{blind[0] - split[0]:+7.4f}  {split[-1]:8.4f} {blind[-1]:8.4f} "
                    f"{blind[-1] - split[-1]:+7.4f}",
                    flush=True,
                )
        if len(runs) > 1:
            print(_summary(name, runs), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"results": results}, indent=1))


def _summary(name: str, runs: list[dict]) -> str:
    """Mean split and blindfl AUC over the runs, their difference, the standard error of
    that mean difference (2 runs or more) and the worst run's difference."""
    parts, errors = [f"{name:8} {'mean':>9} "], []
    for at in (0, -1):
        split = np.array([r["split"][at] for r in runs])
        diff = np.array([r["blindfl"][at] for r in runs]) - split
        parts.append(f"{split.mean():8.4f} {split.mean() + diff.mean():8.4f} {diff.mean():+7.4f}  ")
        if len(runs) > 1:
            errors.append(f"{diff.std(ddof=1) / np.sqrt(len(runs)):.4f}")
    worst = min(min(r["blindfl"][at] - r["split"][at] for r in runs) for at in (0, -1))
    error = f"standard error {' / '.join(errors)}, " if errors else ""
    return "".join(parts) + f"({error}worst run {worst:+.4f}, {len(runs)} runs)"


if __name__ == "__main__":
    sys.exit(main())
