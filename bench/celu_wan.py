"""CELU-VFL vs FedBCD vs vanilla VFL over an emulated WAN, on synthetic CTR data.

    python bench/celu_wan.py [--quick] [--out results.json] [--png auc.png]

Each run is a real `vfl run` topology (coordinator and two party daemons as processes,
gRPC on loopback) with the job's `network` profile shaping every data-plane envelope
(serialisation time by size plus half the RTT, per direction). The model is WDL-like:
embeddings + MLP at the passive party (26 categorical fields), an MLP at the active
party (13 numeric fields), an MLP top model.

The target AUC of a profile is set just below the vanilla run's final AUC (minus
`--margin`); rounds and seconds to target come from the validation history, with
validation time left out of the seconds (local updates pause while validating).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from celu.synth_ctr import CATEGORICAL_FIELDS, write_csv
from coordinator.cli.local import run_local
from coordinator.cli.progress import follow
from coordinator.spec import parse_spec

MODES = {
    "vanilla": {"mode": "none"},
    "fedbcd": {"mode": "fedbcd", "steps": 2},  # Q=4 diverged on this data; Q=2 is its best
    "celu": {"mode": "celu", "workset": 5, "reuse": 5, "xi": 0.5, "schedule": "async"},
    "celu-r8": {"mode": "celu", "workset": 5, "reuse": 8, "xi": 0.5, "schedule": "async"},
}
PROFILES = {"lan-ish 100Mbps/10ms": (100.0, 10.0), "wan 20Mbps/50ms": (20.0, 50.0)}


@dataclass(frozen=True)
class Scale:
    rows: int
    epochs: int
    every: int
    vocab: int


def job_spec(data: Path, mode: dict, profile: tuple[float, float], scale: Scale) -> dict:
    return {
        "job": "celu-bench",
        "parties": [
            {
                "id": "advertiser",
                "role": "active",
                "data": {"path": str(data / "active.csv"), "label": "y"},
            },
            {
                "id": "publisher",
                "role": "passive",
                "data": {
                    "path": str(data / "passive.csv"),
                    "categorical": list(CATEGORICAL_FIELDS),
                },
            },
        ],
        "model": {
            "source": {"out_dim": 64, "hidden": [64], "embedding_dim": 8},
            "top": {"hidden": [32], "task": "binary"},
        },
        "local_updates": mode,
        "train": {"epochs": scale.epochs, "batch_size": 512, "lr": 0.05, "seed": 0},
        "validation": {"fraction": 0.1, "every": scale.every},
        "network": {"bandwidth_mbps": profile[0], "rtt_ms": profile[1]},
    }


def run_one(spec: dict) -> dict:
    view = run_local(parse_spec(spec), lambda c, j: follow(c, j, show=False))
    if view.state != "SUCCEEDED":
        raise SystemExit(f"benchmark job failed: {view.reason}")
    return view.result


def to_target(history: list[dict], target: float) -> tuple[int | None, float | None]:
    for h in history:
        if h["auc"] >= target:
            return h["round"], h["train_seconds"]
    return None, None


def summarise(results: dict[str, dict], margin: float) -> dict[str, dict]:
    target = results["vanilla"]["metrics"]["auc"] - margin
    rows = {}
    for mode, r in results.items():
        rounds, secs = to_target(r["history"], target)
        rows[mode] = {
            "target_auc": round(target, 4),
            "rounds_to_target": rounds,
            "seconds_to_target": secs,
            "final_auc": round(r["metrics"]["auc"], 4),
            "bytes_sent": r["bytes_sent"],
            "rounds": r["rounds"],
            "local_updates": r.get("local_updates", 0),
            "history": r["history"],
        }
    for mode in ("celu", "celu-r8", "fedbcd"):
        for base in ("vanilla", "fedbcd"):
            a, b = rows[mode]["seconds_to_target"], rows[base]["seconds_to_target"]
            if mode != base and a and b:
                rows[mode][f"speedup_vs_{base}"] = round(b / a, 2)
    return rows


def print_table(name: str, rows: dict[str, dict]) -> None:
    print(f"\n{name}  (target AUC {rows['vanilla']['target_auc']})")
    print(
        f"{'mode':<8} {'rounds→tgt':>10} {'sec→tgt':>8} {'final AUC':>9} {'MB sent':>8} "
        f"{'local upd':>9} {'× vanilla':>9} {'× fedbcd':>8}"
    )
    for mode, r in rows.items():

        def fmt(v, spec="") -> str:
            return "-" if v is None else format(v, spec)

        print(
            f"{mode:<8} {fmt(r['rounds_to_target']):>10} {fmt(r['seconds_to_target'], '.1f'):>8} "
            f"{r['final_auc']:>9.4f} {r['bytes_sent'] / 1e6:>8.1f} {r['local_updates']:>9} "
            f"{fmt(r.get('speedup_vs_vanilla'), '.2f'):>9} "
            f"{fmt(r.get('speedup_vs_fedbcd'), '.2f'):>8}"
        )


def plot(all_rows: dict[str, dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(all_rows), 2, figsize=(11, 4 * len(all_rows)), squeeze=False)
    for i, (profile, rows) in enumerate(all_rows.items()):
        for mode, r in rows.items():
            h = r["history"]
            axes[i][0].plot([e["train_seconds"] for e in h], [e["auc"] for e in h], label=mode)
            axes[i][1].plot([e["round"] for e in h], [e["auc"] for e in h], label=mode)
        for ax, xlabel in zip(
            axes[i], ("wall seconds (training)", "communication rounds"), strict=True
        ):
            ax.axhline(rows["vanilla"]["target_auc"], color="grey", linestyle=":")
            ax.set(xlabel=xlabel, ylabel="validation AUC", title=profile)
            ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small data, a few minutes")
    ap.add_argument("--out", type=Path, help="write results as JSON")
    ap.add_argument("--png", type=Path, default=Path("celu_wan.png"))
    ap.add_argument("--margin", type=float, default=0.002, help="target = vanilla AUC - margin")
    args = ap.parse_args()
    scale = Scale(20_000, 2, 5, 20) if args.quick else Scale(60_000, 3, 10, 20)
    out: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        write_csv(tmp, scale.rows, seed=0, vocab=scale.vocab)
        for name, profile in PROFILES.items():
            results = {}
            for mode, lu in MODES.items():
                print(f"running {mode} on {name} ...", file=sys.stderr, flush=True)
                results[mode] = run_one(job_spec(Path(tmp), lu, profile, scale))
            out[name] = summarise(results, args.margin)
            print_table(name, out[name])
    plot(out, args.png)
    print(f"\nplot: {args.png}")
    if args.out:
        slim = {
            p: {m: {k: v for k, v in r.items() if k != "history"} for m, r in rows.items()}
            for p, rows in out.items()
        }
        args.out.write_text(json.dumps(slim, indent=2))
        print(f"results: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
