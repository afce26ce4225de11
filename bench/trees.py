"""Gradient-boosted trees across parties (`model: {trees: {...}}`): `protocol: secureboost`
against `split` trees against LightGBM on the pooled table with the same trees, through
real daemons (a coordinator and both party daemons as local processes with mutual TLS on
loopback, as `vfl run` starts them), and online scoring of the secureboost model.

    python -m bench.trees                          credit shape: 30,000 rows, 50 trees,
                                                   depth 5, 32 bins, learning rate 0.1
    python -m bench.trees --seeds 7 8 9 --json out.json
    python -m bench.trees --shape fate --count 5   FATE's published shape: 100,000 rows,
                                                   30 + 300 columns, depth 3, 32 bins
    python -m bench.trees --protocols split        the plaintext trees only

Credit: the credit rows (bench/credit_data.py: 13 + 10 dense features, a label needing
both parties) are split into 80% training and 20% held-out test rows, every party holding
its own columns of both; each job validates on the test rows (`test_path`) and LightGBM (a
bench-only baseline, `pip install lightgbm`) scores the same rows. LightGBM runs with its
defaults but for the shared settings (`lightgbm_params`): leaves 2^depth at most depth
deep (with every positive split taken, the level-wise tree), max_bin = bins, lambda_l2 =
l2, min_sum_hessian_in_leaf = min_child_weight, and no minimum of rows per leaf or bin
(ours has none).

FATE: synthetic rows of FATE 2.2's published benchmark shape (100,000 rows, 30 columns
and the label at the active party, 300 columns at the passive one; a label from a
logistic model over 10 + 10 of them), written as Parquet; no baseline (FATE's figure is
its own: 114 s a tree on 16 cores a party at 1024 bits).

Printed per job: validation AUC, the median seconds of one tree (the active party's
training clock between validations, the first round aside: it also holds the key
generation), the first round's, and the CPU seconds both party daemons and their worker
processes spent per tree over the whole job (PSI and key generation included; Linux
/proc): unlike the wall time it barely moves with other load, and over the 2 cores it is
what a tree would take on a machine doing nothing else; for the credit secureboost model,
`vfl score`'s latency (one id a request, as bench/predict_online.py measures it). Both
parties run on this machine's cores, as do the tests or sessions beside them: the load
average is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from vfl.cli.progress import follow
from vfl.contract.spec import TableSource, parse_spec
from vfl.local.run import launched, spec_to_yaml
from vfl.local.topology import as_datasets, spec_datasets

from bench import jobs
from bench.credit_data import credit_held_out
from bench.predict_online import measure_online
from bench.procs import tree_cpu_seconds

TREES = {"count": 50, "depth": 5, "bins": 32, "learning_rate": 0.1, "l2": 1.0}
FATE = {"rows": 100_000, "bank": 30, "shop": 300, "depth": 3, "bins": 32}
ONLINE_REQUESTS, ONLINE_SECONDS = 200, 5.0


def lightgbm_params(trees: dict[str, Any], task: str = "binary", classes: int = 2) -> dict:
    """LightGBM's settings for the same trees as a `model.trees` section `trees`."""
    spec = {"l2": 1.0, "min_child_weight": 1.0, **trees}
    params = {
        "objective": task,
        "learning_rate": spec["learning_rate"],
        "num_leaves": 2 ** spec["depth"],
        "max_depth": spec["depth"],
        "max_bin": spec["bins"],
        "lambda_l2": spec["l2"],
        "min_sum_hessian_in_leaf": spec["min_child_weight"],
        "min_data_in_leaf": 1,
        "min_data_in_bin": 1,
        "feature_pre_filter": False,
        "deterministic": True,
        "num_threads": 1,
        "verbose": -1,
    }
    if task == "multiclass":
        params["num_class"] = classes
    return params


def lightgbm_margins(
    x: np.ndarray, y: np.ndarray, x_test: np.ndarray, trees: dict[str, Any], task: str = "binary"
) -> np.ndarray:
    """LightGBM trained on the pooled rows (`x`, `y`) with the settings of `trees`: its
    raw margins of `x_test` (rows, or rows x classes).

    Raises:
        ImportError: lightgbm is not installed (a bench-only baseline).
    """
    try:
        import lightgbm as lgb
    except ImportError as exc:
        raise ImportError("the baseline needs lightgbm: pip install lightgbm") from exc
    classes = int(len(np.unique(y)))
    params = lightgbm_params(trees, task, classes)
    booster = lgb.train(params, lgb.Dataset(x, y), num_boost_round=trees["count"])
    return np.asarray(booster.predict(x_test, raw_score=True))


def fate_tables(folder: Path, seed: int) -> dict[str, tuple[TableSource, str]]:
    """FATE's shape as Parquet: each party's (training table, test file), 80 / 20."""
    rng = np.random.default_rng(seed)
    n = FATE["rows"]
    xa = rng.normal(size=(n, FATE["bank"])).astype(np.float32)
    xb = rng.normal(size=(n, FATE["shop"])).astype(np.float32)
    wa, wb = rng.normal(size=10), rng.normal(size=10)
    z = xa[:, :10] @ wa + np.tanh(xb[:, :10]) @ wb * 1.5
    y = (rng.random(n) < 1 / (1 + np.exp(-(z - z.mean()) / z.std() * 2))).astype(np.int64)
    cut = int(n * 0.8)
    ids = np.arange(n)
    out = {}
    for party, x, label in (("bank", xa, True), ("shop", xb, False)):
        prefix = party[0]
        for suffix, rows in (("", slice(0, cut)), ("_test", slice(cut, n))):
            columns = {"id": ids[rows], **({"y": y[rows]} if label else {})}
            columns |= {f"{prefix}{j}": x[rows, j] for j in range(x.shape[1])}
            pq.write_table(pa.table(columns), folder / f"{party}{suffix}.parquet")
        table = TableSource(path=str(folder / f"{party}.parquet"), label="y" if label else None)
        out[party] = (table, str(folder / f"{party}_test.parquet"))
    return out


def per_tree(history: list[dict]) -> tuple[float, float]:
    """(the median seconds of a tree after the first, the first's) from a job's
    validations (`train_seconds`: the training clock at each)."""
    clock = [h["train_seconds"] for h in history]
    steps = np.diff(clock)
    return (float(np.median(steps)) if len(steps) else float("nan")), float(clock[0])


def run(seed: int, args: argparse.Namespace) -> dict[str, Any]:
    from vfl.party.training.metrics import auc

    trees = {**TREES, "count": args.count, "depth": args.depth, "bins": args.bins}
    row: dict[str, Any] = {"seed": seed, "load_before": round(os.getloadavg()[0], 2)}
    with tempfile.TemporaryDirectory(prefix="vfl-trees-") as folder:
        if args.shape == "fate":
            tables, pooled = fate_tables(Path(folder), seed), None
        else:
            tables, pooled = credit_held_out(Path(folder), args.rows, seed)
        data = {p: {**jobs.table_data(t), "test_path": test} for p, (t, test) in tables.items()}
        specs = {
            protocol: parse_spec(
                jobs.job_spec(
                    f"trees-{protocol}-{seed}",
                    protocol,
                    data["bank"],
                    data["shop"],
                    model={"trees": trees},
                    key_bits=args.key_bits if protocol == "secureboost" else None,
                )
            )
            for protocol in args.protocols
        }
        first = next(iter(specs.values()))
        with launched(spec_datasets(first), Path(folder) / "run") as procs:
            models = {}
            pids = [d.pid for d in procs.topology.parties.values()]
            for protocol, spec in specs.items():
                cpu = sum(tree_cpu_seconds(pid) for pid in pids)
                job = procs.client.submit(spec_to_yaml(as_datasets(spec)))
                view = follow(procs.client, job, show=False)
                cpu = sum(tree_cpu_seconds(pid) for pid in pids) - cpu
                if view.state != "SUCCEEDED":
                    raise SystemExit(f"seed {seed}: the {protocol} job failed: {view.reason}")
                result = view.to_plain()
                median, first_s = per_tree(result["history"])
                row[protocol] = round(float(result["metrics"]["auc"]), 4)
                row[f"{protocol}_s_per_tree"] = round(median, 3)
                row[f"{protocol}_first_s"] = round(first_s, 2)
                row[f"{protocol}_cpu_per_tree"] = round(cpu / len(result["history"]), 3)
                models[protocol] = job
            if "secureboost" in models and args.shape == "credit" and not args.no_online:
                ids = [str(i) for i in range(int(args.rows * 0.8))]
                row["online"] = measure_online(
                    procs.client, models["secureboost"], ids, ONLINE_REQUESTS, ONLINE_SECONDS
                )
    if pooled is not None and not args.no_baseline:
        margins = lightgbm_margins(pooled["x"], pooled["y"], pooled["x_test"], trees)
        row["lightgbm"] = round(auc(pooled["y_test"], margins), 4)
    row["load_after"] = round(os.getloadavg()[0], 2)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.trees", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--shape", choices=("credit", "fate"), default="credit")
    parser.add_argument("--rows", type=int, default=30_000, help="credit rows")
    parser.add_argument("--count", type=int, default=TREES["count"])
    parser.add_argument("--depth", type=int)
    parser.add_argument("--bins", type=int, default=TREES["bins"])
    parser.add_argument("--key-bits", type=int, default=2048)
    parser.add_argument(
        "--protocols", nargs="+", default=["secureboost", "split"], choices=("secureboost", "split")
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[7], help="data seeds")
    parser.add_argument("--no-baseline", action="store_true", help="skip LightGBM")
    parser.add_argument("--no-online", action="store_true", help="skip online scoring")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    if args.depth is None:
        args.depth = FATE["depth"] if args.shape == "fate" else TREES["depth"]
    rows = FATE["rows"] if args.shape == "fate" else args.rows
    print(
        f"{args.shape} shape, {rows} rows (20% held out), {args.count} trees, depth "
        f"{args.depth}, {args.bins} bins, learning rate {TREES['learning_rate']}, "
        f"secureboost keys of {args.key_bits} bits; both parties on {os.cpu_count()} cores"
    )
    header = f"{'seed':>4}"
    for protocol in args.protocols:
        header += f" {protocol + ' AUC':>16} {'s/tree':>7} {'1st s':>6} {'cpu/tree':>8}"
    print(header + f" {'lightgbm':>8} {'load':>9}")
    results = []
    for seed in args.seeds:
        r = run(seed, args)
        results.append(r)
        line = f"{seed:4}"
        for protocol in args.protocols:
            line += (
                f" {r[protocol]:16.4f} {r[f'{protocol}_s_per_tree']:7.3f}"
                f" {r[f'{protocol}_first_s']:6.2f} {r[f'{protocol}_cpu_per_tree']:8.2f}"
            )
        lgb = r.get("lightgbm")
        line += f" {lgb:8.4f}" if lgb is not None else f" {'-':>8}"
        print(line + f" {r['load_before']:4.1f}/{r['load_after']:4.1f}", flush=True)
        if "online" in r:
            o = r["online"]
            print(
                f"     vfl score (secureboost, one id a request): p50 {o['p50_ms']:.1f} ms, "
                f"p99 {o['p99_ms']:.1f} ms; 8 clients {o['per_second_8_clients']:.0f} scores/s",
                flush=True,
            )
    if args.json:
        args.json.write_text(json.dumps({"results": results}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
