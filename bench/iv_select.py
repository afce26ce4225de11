"""`vfl analyze` and `features: {select: {iv_min}}` through real `vfl run`-style jobs
(coordinator and both party daemons as local processes, 2048-bit keys for the analysis):
how long the analysis takes next to training, which columns fall below the bar, and the
held-out AUC of a job on every column against the same job on the columns kept.

    python -m bench.iv_select                       credit, scorecard (30,000 rows each),
                                                    breast, ionosphere
    python -m bench.iv_select --tables credit --iv-min 0.02 --json out.json

Each table is split into 80% training rows and 20% held-out rows at both parties; every
job validates on the held-out rows (`test_path`), and the selection is made on all the
training rows (as `vfl analyze` on the training table measures them). Models: a split
network (bottom 16, top [32], 5 epochs) and split trees (30 trees, depth 5, 32 bins).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from vfl.cli.progress import follow
from vfl.contract.spec import parse_spec
from vfl.local.run import run_local

from bench import jobs
from bench.credit_data import credit_held_out

SHARED = Path(os.environ.get("VFL_SHARED_DATA", "/work/shared/data"))  # its README

NETWORK = {"model": jobs.binary_model(16, [32]), "train": {"epochs": 5, "batch_size": 256}}
TREES = {"model": {"trees": {"count": 30, "depth": 5, "bins": 32}}}
FATE = {
    "breast": ("breast_hetero_guest.csv", "breast_hetero_host.csv", "id", "y"),
    "ionosphere": (
        "ionosphere_scale_hetero_guest.csv",
        "ionosphere_scale_hetero_host.csv",
        "sid",
        "label",
    ),
}


def tables(name: str, folder: Path) -> dict[str, dict[str, Any]]:
    """Each party's `data:` (training file and held-out `test_path`) of table `name`."""
    if name in ("credit", "scorecard"):
        made, _ = credit_held_out(folder, 30_000, 7, scorecard=name == "scorecard")
        return {p: {**jobs.table_data(t), "test_path": test} for p, (t, test) in made.items()}
    guest, host, key, label = FATE[name]
    out = {}
    for party, file in (("bank", guest), ("shop", host)):
        lines = (SHARED / "fate" / file).read_text().splitlines()
        head, rows = lines[0], lines[1:]
        held = [r for r in rows if int(r.split(",")[0]) % 5 == 0]
        (folder / f"{party}.csv").write_text(
            "\n".join([head, *[r for r in rows if r not in held]]) + "\n"
        )
        (folder / f"{party}_test.csv").write_text("\n".join([head, *held]) + "\n")
        data = {
            "path": str(folder / f"{party}.csv"),
            "id": key,
            "test_path": str(folder / f"{party}_test.csv"),
        }
        out[party] = {**data, "label": label} if party == "bank" else data
    return out


def job(name: str, data: dict[str, dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "job": name,
        "parties": [
            {"id": "bank", "role": "active", "data": data["bank"]},
            {"id": "shop", "role": "passive", "data": data["shop"]},
        ],
        **extra,
    }


def run(spec: dict[str, Any]) -> dict[str, Any]:
    view = run_local(parse_spec(spec), lambda c, j: follow(c, j, show=False))
    if view.state != "SUCCEEDED":
        raise SystemExit(f"job {spec['job']} failed: {view.reason}")
    return view.to_plain()


def measure(name: str, iv_min: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="vfl-iv-") as folder:
        data = tables(name, Path(folder))
        analysis = run(job(f"{name}-analyze", data, analyze=True))
        ivs = [c.get("iv", 0.0) for c in analysis["analysis"]["columns"]]
        row: dict[str, Any] = {
            "table": name,
            "rows": analysis["analysis"]["rows"],
            "columns": len(ivs),
            "below": int(sum(v < iv_min for v in ivs)),
            "analyze_s": analysis["seconds"],
            "psi_s": analysis["psi_seconds"],
        }
        select = {"features": {"select": {"iv_min": iv_min}}}
        for model, section in (("network", NETWORK), ("trees", TREES)):
            every = run(job(f"{name}-{model}", data, **section))
            kept = run(job(f"{name}-{model}-iv", data, **section, **select))
            row[f"{model}_all"] = round(every["metrics"]["auc"], 4)
            row[f"{model}_iv"] = round(kept["metrics"]["auc"], 4)
            row[f"{model}_diff"] = round(kept["metrics"]["auc"] - every["metrics"]["auc"], 4)
            row[f"{model}_s"] = every["seconds"]
            row[f"{model}_iv_s"] = kept["seconds"]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.iv_select", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--tables", nargs="+", default=["credit", "scorecard", "breast", "ionosphere"]
    )
    parser.add_argument("--iv-min", type=float, default=0.02)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    rows = []
    head = (
        "table",
        "rows",
        "columns",
        "below",
        "analyze_s",
        "psi_s",
        "network_all",
        "network_iv",
        "network_diff",
        "network_s",
        "trees_all",
        "trees_iv",
        "trees_diff",
        "trees_s",
    )
    print(f"iv_min {args.iv_min}; AUC on held-out rows; seconds launch to end (PSI included)")
    print(" ".join(f"{h:>12}" for h in head))
    for name in args.tables:
        r = measure(name, args.iv_min)
        rows.append(r)
        print(" ".join(f"{r[h]:>12}" for h in head), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"iv_min": args.iv_min, "results": rows}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
