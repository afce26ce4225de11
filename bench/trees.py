"""Gradient-boosted trees across parties (`model: {trees: {...}}`, `protocol: split`)
against LightGBM on the pooled table with the same trees, through a real `vfl run` job
(coordinator and both party daemons as local processes on loopback).

    python -m bench.trees                          credit shape: 30,000 rows, 50 trees,
                                                   depth 5, 32 bins, learning rate 0.1
    python -m bench.trees --seeds 7 8 9 --json out.json

The credit rows (bench/credit_data.py: 13 + 10 dense features, a label needing both
parties) are split into 80% training and 20% held-out test rows, every party holding
its own columns of both; the job validates on the test rows (`test_path`) and LightGBM
(a bench-only baseline, `pip install lightgbm`) scores the same rows. LightGBM runs
with its defaults but for the shared settings (`lightgbm_params`): leaves 2^depth at
most depth deep (with every positive split taken, the level-wise tree), max_bin = bins,
lambda_l2 = l2, min_sum_hessian_in_leaf = min_child_weight, and no minimum of rows per
leaf or bin (ours has none). Printed per data seed: both validation AUCs, their
difference, and the job's training seconds per tree (the party daemons' rounds; PSI and
start-up aside).

`protocol: secureboost` will join this table with its own column (issue 37).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from vfl.cli.progress import follow
from vfl.contract.spec import parse_spec
from vfl.local.run import run_local

from bench import jobs
from bench.credit_data import credit_held_out

TREES = {"count": 50, "depth": 5, "bins": 32, "learning_rate": 0.1, "l2": 1.0}


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


def run(seed: int, args: argparse.Namespace) -> dict[str, float]:
    from vfl.party.training.metrics import auc

    trees = {**TREES, "count": args.count, "depth": args.depth, "bins": args.bins}
    with tempfile.TemporaryDirectory(prefix="vfl-trees-") as folder:
        tables, pooled = credit_held_out(Path(folder), args.rows, seed)
        data = {p: {**jobs.table_data(t), "test_path": test} for p, (t, test) in tables.items()}
        spec = jobs.job_spec(
            f"trees-{seed}", "split", data["bank"], data["shop"], model={"trees": trees}
        )
        view = run_local(parse_spec(spec), lambda c, j: follow(c, j, show=False))
    if view.state != "SUCCEEDED":
        raise SystemExit(f"seed {seed}: the trees job failed: {view.reason}")
    result = view.to_plain()
    history = result["history"]
    ours = float(result["metrics"]["auc"])
    theirs = auc(
        pooled["y_test"], lightgbm_margins(pooled["x"], pooled["y"], pooled["x_test"], trees)
    )
    return {
        "seed": seed,
        "split": round(ours, 4),
        "lightgbm": round(theirs, 4),
        "diff": round(ours - theirs, 4),
        "s_per_tree": round(history[-1]["train_seconds"] / len(history), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.trees", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--rows", type=int, default=30_000)
    parser.add_argument("--count", type=int, default=TREES["count"])
    parser.add_argument("--depth", type=int, default=TREES["depth"])
    parser.add_argument("--bins", type=int, default=TREES["bins"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[7], help="data seeds")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    print(
        f"credit {args.rows} rows (20% held out), {args.count} trees, depth {args.depth}, "
        f"{args.bins} bins, learning rate {TREES['learning_rate']}: validation AUC"
    )
    print(f"{'seed':>4} {'split':>7} {'lightgbm':>8} {'diff':>7} {'s/tree':>7}")
    rows = []
    for seed in args.seeds:
        r = run(seed, args)
        rows.append(r)
        print(
            f"{seed:4} {r['split']:7.4f} {r['lightgbm']:8.4f} {r['diff']:+7.4f} "
            f"{r['s_per_tree']:7.3f}",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps({"results": rows}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
