"""What a tree job leaks, measured: `vfl attack` on the credit table's tree jobs under
`split`, `secureboost` and `secureboost` with each of the peers' mitigations
(`model.trees.active_trees`, `active_levels`), and what each costs in validation AUC.

    python -m bench.tree_attacks                         every case (minutes each)
    python -m bench.tree_attacks --rows 8000 --count 10  a smaller run
    python -m bench.tree_attacks --only split secureboost
    python -m bench.tree_attacks --only "split + active_levels 2" --json b.json
    python -m bench.tree_attacks --merge a.json b.json       the table of earlier runs

The table: bank (active, 13 columns and the label) and shop (passive, 10 columns) from
bench/credit_data.py (`credit_tables`, about half positive), 30,000 rows, 20% held out
for validation; 50 trees of depth 5, 32 bins, learning rate 0.1, secureboost at 2048
bits. Each case is one `vfl attack --json` (tree jobs run once: no attack of theirs
compares a permuted-label run); the table gives each attack's score per case, the
chance band (of the first case; the bands differ little) and the job's validation AUC.
`split` grows the same trees as `secureboost` (from (g, h) in the clear rather than at
secureboost's fixed point), so every attack but `gradient_sign` scores the same under
both: the `split + ...` cases measure a mitigation in a minute rather than half an hour.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
from pathlib import Path

from bench.attacks import attack
from bench.credit_data import credit_tables
from bench.jobs import job_spec, table_data

CASES = {  # name -> (protocol, model.trees fields beyond the shared ones)
    "split": ("split", {}),
    "secureboost": ("secureboost", {}),
    "secureboost + active_trees 1": ("secureboost", {"active_trees": 1}),
    "secureboost + active_levels 2": ("secureboost", {"active_levels": 2}),
    # the same trees as secureboost's (its attacks but gradient_sign score the same), faster
    "split + active_trees 1": ("split", {"active_trees": 1}),
    "split + active_levels 2": ("split", {"active_levels": 2}),
}
DEFAULT = list(CASES)[:4]


def spec(name: str, data: dict, count: int) -> dict:
    protocol, extra = CASES[name]
    trees = {"count": count, "depth": 5, "bins": 32, "learning_rate": 0.1, **extra}
    body = job_spec(
        "-".join(["credit-trees", protocol, *extra]).replace("_", "-"),
        protocol,
        table_data(data["bank"]),
        table_data(data["shop"]),
        key_bits=2048 if protocol == "secureboost" else None,
        model={"trees": trees},
        train={"seed": 0},
        validation={"fraction": 0.2},
    )
    return body


def label(row: dict) -> str:
    """A row's name across cases: its attack and what it used, without the counts that
    differ between cases."""
    used = re.sub(r" of (\d+ trees|the first tree it saw)", "", row["used"].split(":")[0])
    used = used.split(" + ")[0].split(", round")[0]
    return f"{row['attack']} ({row['attacker']}): {used}"


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.tree_attacks", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--only", nargs="+", choices=list(CASES), default=DEFAULT)
    parser.add_argument("--rows", type=int, default=30_000)
    parser.add_argument("--count", type=int, default=50, help="trees")
    parser.add_argument("--json", type=Path, help="also write every result here, case by case")
    parser.add_argument(
        "--merge", type=Path, nargs="+", help="print the table of earlier runs' --json files"
    )
    parser.add_argument("--keep", type=Path, help="keep each case's views, audits and logs here")
    args = parser.parse_args()
    results: dict[str, dict] = {}
    if args.merge:
        for path in args.merge:
            results.update(json.loads(path.read_text()))
        table(results)
        return
    with tempfile.TemporaryDirectory(prefix="vfl-bench-tree-attacks-") as tmp:
        folder = Path(tmp)
        data = credit_tables(folder, rows=args.rows)
        for name in args.only:
            body = spec(name, data, args.count)
            kept = () if args.keep is None else ("--workdir", str(args.keep / body["job"]))
            results[name] = attack(body, folder, *kept)
            s = results[name]["seconds"]
            print(f"{name}: job {s['job']:.0f} s, attacks {s['attacks']:.1f} s", flush=True)
            for row in results[name]["attacks"]:
                print(f"  {row['attack']:15} {row['score']:.3f} {row['verdict']:9} {row['used']}")
            if args.json:
                args.json.write_text(json.dumps(results, indent=2) + "\n")
    table(results)


def table(results: dict[str, dict]) -> None:
    """Each attack's score per case, the chance band, the validation AUC."""
    names = list(results)
    print("\n| attack | " + " | ".join(names) + " | chance band |")
    print("|---|" + "---|" * (len(names) + 1))
    aucs = [results[n].get("metrics", {}).get("auc", float("nan")) for n in names]
    print("| validation AUC | " + " | ".join(f"{a:.4f}" for a in aucs) + " | |")
    rows: dict[str, dict[str, dict]] = {}
    for n in names:
        for row in results[n]["attacks"]:
            rows.setdefault(label(row), {})[n] = row
    for what, by_case in rows.items():
        cells = [
            f"{by_case[n]['score']:.3f}" + (" (leaks)" if by_case[n]["verdict"] == "leaks" else "")
            if n in by_case
            else "-"
            for n in names
        ]
        first = next(iter(by_case.values()))
        band = f"{first['chance_low']:.3f}-{first['chance_high']:.3f}"
        print(f"| {what} | " + " | ".join(cells) + f" | {band} |")


if __name__ == "__main__":
    main()
