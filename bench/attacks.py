"""What leaks, measured: `vfl attack` on real jobs, split against blindfl, on two tables
with 25,000+ scored rows, the split defences' accuracy cost against the attack scores
they buy, and feature inference against `out_dim`.

    python -m bench.attacks                                  every case below (long)
    python -m bench.attacks --only a9a22:split credit3:split:hidden32   some cases
    python -m bench.attacks --defences                       split's defences on a9a22
    python -m bench.attacks --out-dims 1 2 4 8 16            blindfl's Z vs out_dim (credit3)
    python -m bench.attacks --defences --rows 8000           the defences on fewer rows

Tables (bank active with the label, shop passive):

    a9a22    28,000 rows of a9a's training file, 22% positive (bench/a9a_data.py:
             a9a_sampled_tables); bank 51 binary columns, shop 74
    credit3  synthetic credit rows, 3% positive (bench/credit_data.py, `positives`); bank 13
             dense columns, shop 10; 30,000 rows for split, 10,000 for blindfl (8,000
             training rows: 16,000 scored over two epochs; the 2048-bit run in minutes)

Every job: source out_dim 16 (unless --out-dims), top [32], batch 256, 2 epochs, lr 0.05,
adagrad, 20% of the rows held out and validated once at the end; blindfl with 1024-bit
test keys (the `:2048` case with 2048). A case's third part is the key size or, for
`:hidden32`, a bottom model with one hidden layer of 32 (split's default bottom, like
blindfl's source layer, is linear), or for `:bfv`, `crypto: {scheme: bfv}`. Each case
is one `vfl attack --json` (the job, the same job on permuted labels, the attacks); the
table gives each attack's score, its baseline, the band a view without the labels lands
in and the verdict, then the job's validation AUC and the seconds of the job, of the
permuted-label job and of the attacks.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from bench.a9a_data import a9a_sampled_tables
from bench.credit_data import credit_tables
from bench.jobs import binary_model, job_spec, table_data

REPO = Path(__file__).resolve().parent.parent
CASES = (
    "a9a22:split",
    "a9a22:blindfl",
    "credit3:split",
    "credit3:split:hidden32",
    "credit3:blindfl",
    "credit3:blindfl:2048",
    "credit3:blindfl:bfv",
)
DEFENCES = (  # (name, defence) on a9a22 split
    ("none", None),
    ("noise 4", {"gradient_noise": 4.0}),
    ("noise 16", {"gradient_noise": 16.0}),
    ("eps 1", {"label_epsilon": 1.0}),
)


ROWS = {  # table -> protocol -> rows (--rows overrides)
    "a9a22": {"split": 28_000, "blindfl": 28_000},
    "credit3": {"split": 30_000, "blindfl": 10_000},
}


def tables(name: str, folder: Path, rows: int) -> dict:
    """The table `name` with `rows` rows, written into its own folder under `folder`."""
    at = folder / f"{name}-{rows}"
    at.mkdir(exist_ok=True)
    if name == "a9a22":
        return a9a_sampled_tables(at, rows=rows, positives=0.22)
    if name == "credit3":
        return credit_tables(at, rows=rows, positives=0.03)
    raise SystemExit(f"unknown table {name}")


def spec(table: str, protocol: str, data: dict, key_bits: int, **extra) -> dict:
    out_dim, hidden = extra.pop("out_dim", 16), extra.pop("hidden", [])
    model = binary_model(out_dim, [32])
    model["source"]["hidden"] = hidden  # the bottom's (binary_model's `hidden` is the top's)
    return job_spec(
        f"{table}-{protocol}",
        protocol,
        table_data(data["bank"]),
        table_data(data["shop"]),
        key_bits=key_bits if protocol == "blindfl" else None,
        model=model,
        train={"epochs": 2, "batch_size": 256, "lr": 0.05, "seed": 0},
        validation={"fraction": 0.2, "every": 100_000},
        **extra,
    )


def attack(body: dict, folder: Path, *flags: str) -> dict:
    """`vfl attack --json` of one spec; the result with its seconds."""
    job = folder / f"{body['job']}.yaml"
    job.write_text(yaml.safe_dump(body))
    began = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "vfl.cli.main", "attack", str(job), "--json", *flags],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    if out.returncode != 0:
        raise SystemExit(f"vfl attack {body['job']} failed:\n{out.stderr[-3000:]}")
    result = json.loads(out.stdout)
    found = re.search(r"job ([\d.]+), permuted-label job ([\d.]+), attacks ([\d.]+)", out.stderr)
    result["seconds"] = dict(
        zip(("job", "permuted", "attacks"), map(float, found.groups()), strict=True)
    )
    result["seconds"]["total"] = round(time.monotonic() - began, 1)
    return result


def print_rows(case: str, result: dict) -> None:
    s, auc = result["seconds"], result.get("metrics", {}).get("auc", float("nan"))
    print(
        f"\n{case}: validation AUC {auc:.4f}; seconds: job {s['job']:.0f}, permuted-label job "
        f"{s['permuted']:.0f}, attacks {s['attacks']:.1f}"
    )
    print("| attack | attacker | used | score | baseline | chance band | verdict |")
    print("|---|---|---|---|---|---|---|")
    for r in result["attacks"]:
        base = "" if r["baseline"] is None else f"{r['baseline']:.3f}"
        print(
            f"| {r['attack']} | {r['attacker']} | {r['used']} | {r['score']:.3f} | {base} | "
            f"{r['chance_low']:.3f}-{r['chance_high']:.3f} | {r['verdict']} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.attacks", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--only", nargs="+", choices=CASES, default=list(CASES))
    parser.add_argument("--defences", action="store_true", help="split's defences on a9a22")
    parser.add_argument(
        "--no-distinguisher", action="store_true", help="one run per case (no permuted twin)"
    )
    parser.add_argument("--out-dims", type=int, nargs="+", help="blindfl on credit3 per out_dim")
    parser.add_argument("--rows", type=int, help="rows of each table (default: ROWS)")
    parser.add_argument("--json", type=Path, help="also write every result here")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="vfl-bench-attacks-") as tmp:
        folder = Path(tmp)
        made: dict[tuple[str, int], dict] = {}

        def table_of(name: str, protocol: str) -> dict:
            rows = args.rows or ROWS[name][protocol]
            if (name, rows) not in made:
                made[name, rows] = tables(name, folder, rows)
            return made[name, rows]

        if args.defences:
            data = table_of("a9a22", "split")
            print("| defence | validation AUC | norm | direction | model completion gain |")
            print("|---|---|---|---|---|")
            for name, defence in DEFENCES:
                extra = {} if defence is None else {"defence": defence}
                body = spec("a9a22", "split", data, 1024, **extra)
                body["job"] = f"a9a22-split-{name.replace(' ', '')}"
                r = attack(body, folder, "--no-distinguisher")
                results[f"defence {name}"] = r
                pick = {a["attack"]: a for a in r["attacks"] if a["attack"] != "feature_inference"}
                mc = pick["model_completion"]
                print(
                    f"| {name} | {r['metrics']['auc']:.4f} | {pick['norm']['score']:.3f} | "
                    f"{pick['direction']['score']:.3f} | {mc['score'] - mc['baseline']:+.3f} |"
                )
        elif args.out_dims:
            data = table_of("credit3", "blindfl")
            print("| out_dim | k | mean R² from Z + X_B | from X_B alone |")
            print("|---|---|---|---|")
            for h in args.out_dims:
                body = spec("credit3", "blindfl", data, 1024, out_dim=h)
                body["job"] = f"credit3-blindfl-h{h}"
                r = attack(body, folder, "--no-distinguisher")
                results[f"out_dim {h}"] = r
                for a in r["attacks"]:
                    if a["attack"] == "feature_inference":
                        k = a["used"].split("k=")[1].split()[0]
                        print(f"| {h} | {k} | {a['score']:.3f} | {a['baseline']:.3f} |")
        else:
            for case in args.only:
                table, protocol, *option = case.split(":")
                data = table_of(table, protocol)
                if option == ["hidden32"]:
                    body = spec(table, protocol, data, 1024, hidden=[32])
                    body["job"] += "-hidden32"
                elif option == ["bfv"]:
                    body = spec(table, protocol, data, 1024)
                    body["crypto"]["scheme"] = "bfv"
                    body["job"] += "-bfv"
                else:
                    body = spec(table, protocol, data, int(option[0]) if option else 1024)
                flags = ("--no-distinguisher",) if args.no_distinguisher else ()
                results[case] = attack(body, folder, *flags)
                print_rows(case, results[case])
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
