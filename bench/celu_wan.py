"""CELU-VFL vs FedBCD vs vanilla VFL over an emulated WAN, on synthetic CTR data.

    python -m bench.celu_wan [--quick] [--out results.json] [--png auc.png] [--profile P]
                             [--seeds N]

Each run is a real `vfl run` topology (coordinator and two party daemons as processes,
gRPC on loopback) with the job's `network` profile shaping every data-plane envelope
(serialisation time by size plus half the RTT, per direction). The model is WDL-like:
embeddings + MLP at the passive party (26 categorical fields), an MLP at the active
party (13 numeric fields), an MLP top model; the regime is the CELU-VFL paper's (1M rows,
one pass in 4096-row batches, Adagrad at lr 0.05).

``--quick`` (3 minutes) trains 100k rows in 44 rounds of 2048: it shows that everything
runs, not the regime. ``--profile`` runs one profile only. ``--seeds N`` trains every mode
with train seeds 0..N-1 and reports each seed's table, then the medians. The target AUC
of a profile is the vanilla run's final AUC minus `--margin`; a mode that never reaches
it gets a lower bound on the speedup over it (printed as ">x").

The measured results, and the sweeps behind this configuration: bench/README.md, "CELU
over a WAN".
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from vfl.celu.synth_ctr import write_csv
from vfl.cli.progress import follow
from vfl.contract.spec import parse_spec
from vfl.local.run import run_local

from bench.jobs import binary_model, ctr_data, job_spec as bench_job

MODES: dict[str, dict[str, object]] = {
    "vanilla": {"mode": "none"},
    "fedbcd": {"mode": "fedbcd", "steps": 1},  # best of Q in {1, 2, 4}, see the docstring
    "celu": {"mode": "celu", "workset": 5, "reuse": 5, "xi": 0.5, "schedule": "async", "steps": 4},
    "celu-tuned": {
        "mode": "celu",
        "workset": 5,
        "reuse": 8,
        "xi": 0.5,
        "schedule": "async",
        "steps": 7,
    },
}
PROFILES = {"100Mbps-10ms": (100.0, 10.0), "20Mbps-50ms": (20.0, 50.0)}  # (Mbit/s, RTT ms)
BASELINES = ("vanilla", "fedbcd")


@dataclass(frozen=True)
class BenchConfig:
    """Data size and training settings shared by every mode of one benchmark run."""

    rows: int
    vocab: int
    epochs: int
    batch_size: int
    every: int  # validate every this many rounds (and at the end)
    lr: float = 0.05
    optimizer: str = "adagrad"
    out_dim: int = 16  # the cut layer: the width of every exchanged activation


FULL = BenchConfig(rows=1_000_000, vocab=100, epochs=1, batch_size=4096, every=10)
QUICK = BenchConfig(rows=100_000, vocab=100, epochs=1, batch_size=2048, every=5)


def job_spec(
    data: Path,
    mode: dict[str, object],
    profile: tuple[float, float],
    cfg: BenchConfig,
    seed: int = 0,
) -> dict:
    return bench_job(
        "celu-bench",
        None,
        *ctr_data(data),
        model=binary_model(cfg.out_dim, [32], hidden=[64], embedding_dim=8),
        train={
            "epochs": cfg.epochs,
            "batch_size": cfg.batch_size,
            "lr": cfg.lr,
            "optimizer": cfg.optimizer,
            "seed": seed,
            "timeout_s": 1800.0,  # aligning a million ids takes minutes on 2 shared cores
        },
        validation={"fraction": 0.1, "every": cfg.every},
        ids=("advertiser", "publisher"),
        local_updates=mode,
        network={"bandwidth_mbps": profile[0], "rtt_ms": profile[1]},
    )


def run_one(spec: dict) -> dict:
    view = run_local(parse_spec(spec), lambda c, j: follow(c, j, show=False))
    if view.state != "SUCCEEDED":
        raise SystemExit(f"benchmark job failed: {view.reason}")
    return view.to_plain()


def to_target(history: list[dict], target: float) -> tuple[int | None, float | None]:
    for h in history:
        if h["auc"] >= target:
            return h["round"], h["train_seconds"]
    return None, None


def summarise(results: dict[str, dict], margin: float) -> dict[str, dict]:
    """Per mode: rounds and seconds to the target, final AUC, traffic, local updates."""
    target = results["vanilla"]["metrics"]["auc"] - margin
    rows = {}
    for mode, r in results.items():
        rounds, secs = to_target(r["history"], target)
        rows[mode] = {
            "target_auc": round(target, 4),
            "rounds_to_target": rounds,
            "seconds_to_target": secs,
            "train_seconds": r["history"][-1]["train_seconds"],
            "final_auc": round(r["metrics"]["auc"], 4),
            "bytes_sent": r["bytes_sent"],
            "rounds": r["rounds"],
            "local_updates": {p: v.get("local_updates", 0) for p, v in r["parties"].items()},
            "history": r["history"],
        }
    for mode in rows:
        for base in BASELINES:
            if mode not in (base, "vanilla") and base in rows:
                rows[mode].update(speedup(rows[mode], rows[base], base))
    return rows


def speedup(fast: dict, base: dict, name: str) -> dict:
    """`fast`'s speedup over `base` to the target; a lower bound if `base` never got there."""
    mine, theirs = fast["seconds_to_target"], base["seconds_to_target"]
    if not mine:
        return {}
    if theirs:
        return {f"speedup_vs_{name}": round(theirs / mine, 2)}
    return {f"speedup_vs_{name}_at_least": round(base["train_seconds"] / mine, 2)}


SUMMARY_KEYS = ("rounds_to_target", "seconds_to_target", "final_auc", "bytes_sent")


def _median(values: list) -> float | None:
    """The median, counting None (never reached the target) as larger than any value."""
    ranked = sorted(values, key=lambda v: (v is None, v or 0))
    mid = ranked[(len(ranked) - 1) // 2 : len(ranked) // 2 + 1]
    if any(v is None for v in mid):
        return None
    return sum(mid) / len(mid)


def median_over_seeds(per_seed: list[dict[str, dict]]) -> dict[str, dict]:
    """Per mode: the median of every summary value over seeds, and the seeds' own rows.

    A speedup that is a lower bound in any seed (its baseline never reached the target)
    makes the median a lower bound too: each bound is at most the true value, so their
    median is at most the true median.
    """
    rows = {}
    for mode in per_seed[0]:
        runs = [seed_rows[mode] for seed_rows in per_seed]
        row = {k: _median([r[k] for r in runs]) for k in SUMMARY_KEYS}
        row["target_auc"] = _median([r["target_auc"] for r in runs])
        for base in BASELINES:
            exact, bound = f"speedup_vs_{base}", f"speedup_vs_{base}_at_least"
            values = [r.get(exact, r.get(bound)) for r in runs]
            if any(v is None for v in values):
                continue  # this mode never reached its target in some seed
            key = bound if any(bound in r for r in runs) else exact
            row[key] = round(_median(values), 2)
        row["per_seed"] = [{k: v for k, v in r.items() if k != "history"} for r in runs]
        rows[mode] = row
    return rows


def fmt_speedup(row: dict, base: str) -> str:
    if f"speedup_vs_{base}" in row:
        return f"{row[f'speedup_vs_{base}']:.2f}"
    if f"speedup_vs_{base}_at_least" in row:
        return f">{row[f'speedup_vs_{base}_at_least']:.2f}"
    return "-"


def to_target_cells(row: dict) -> tuple[str, str]:
    """Rounds and seconds to the target as table cells ("-": never reached)."""
    rounds, secs = row["rounds_to_target"], row["seconds_to_target"]
    return ("-" if rounds is None else f"{rounds:.0f}", "-" if secs is None else f"{secs:.1f}")


def print_medians(name: str, rows: dict[str, dict]) -> None:
    seeds = len(rows["vanilla"]["per_seed"])
    print(f"\n{name}: medians over {seeds} seeds")
    head = ("mode", "rounds→tgt", "sec→tgt", "final AUC", "× vanilla", "× fedbcd")
    print(f"{head[0]:<10} " + " ".join(f"{h:>{max(8, len(h))}}" for h in head[1:]))
    for mode, r in rows.items():
        rounds, secs = to_target_cells(r)
        print(
            f"{mode:<10} {rounds:>10} {secs:>8} {r['final_auc']:>9.4f} "
            f"{fmt_speedup(r, 'vanilla'):>9} {fmt_speedup(r, 'fedbcd'):>8}"
        )


def print_table(name: str, rows: dict[str, dict]) -> None:
    print(f"\n{name}  (target AUC {rows['vanilla']['target_auc']})")
    print(
        f"{'mode':<10} {'rounds→tgt':>10} {'sec→tgt':>8} {'train s':>8} {'final AUC':>9} "
        f"{'MB sent':>8} {'local upd/round':>15} {'× vanilla':>9} {'× fedbcd':>8}"
    )
    for mode, r in rows.items():
        rounds, secs = to_target_cells(r)
        per_round = "/".join(f"{n / r['rounds']:.1f}" for n in r["local_updates"].values())
        print(
            f"{mode:<10} {rounds:>10} {secs:>8} {r['train_seconds']:>8.1f} "
            f"{r['final_auc']:>9.4f} {r['bytes_sent'] / 1e6:>8.1f} {per_round:>15} "
            f"{fmt_speedup(r, 'vanilla'):>9} {fmt_speedup(r, 'fedbcd'):>8}"
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


def write_json(
    out: dict[str, dict], path: Path, cfg: BenchConfig, margin: float, seeds: int
) -> None:
    """The summary without the per-validation histories (the PNG has the curves)."""
    slim = {
        p: {m: {k: v for k, v in r.items() if k != "history"} for m, r in rows.items()}
        for p, rows in out.items()
    }
    meta = {"config": cfg.__dict__, "margin": margin, "modes": MODES, "seeds": seeds}
    path.write_text(json.dumps({"bench": meta, "profiles": slim}, indent=2))


def main() -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.celu_wan", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--quick", action="store_true", help="small data, a few minutes")
    ap.add_argument("--out", type=Path, help="write results as JSON")
    ap.add_argument("--png", type=Path, default=Path("celu_wan.png"))
    ap.add_argument("--margin", type=float, default=0.002, help="target = vanilla AUC - margin")
    ap.add_argument(
        "--profile", choices=sorted(PROFILES), action="append", help="run only this profile"
    )
    ap.add_argument("--seeds", type=int, default=1, help="train seeds 0..N-1, then medians")
    args = ap.parse_args()
    if args.seeds < 1:
        ap.error("--seeds must be at least 1")
    profiles = {n: PROFILES[n] for n in PROFILES if not args.profile or n in args.profile}
    cfg = QUICK if args.quick else FULL
    out: dict[str, dict] = {}
    curves: dict[str, dict] = {}  # seed 0's rows, with their validation histories
    with tempfile.TemporaryDirectory() as tmp:
        write_csv(tmp, cfg.rows, seed=0, vocab=cfg.vocab)
        for name, profile in profiles.items():
            per_seed = []
            for seed in range(args.seeds):
                results = {}
                for mode, lu in MODES.items():
                    print(f"running {mode} on {name}, seed {seed} ...", file=sys.stderr, flush=True)
                    results[mode] = run_one(job_spec(Path(tmp), lu, profile, cfg, seed))
                per_seed.append(summarise(results, args.margin))
                print_table(f"{name}, seed {seed}", per_seed[-1])
            curves[name] = per_seed[0]
            out[name] = per_seed[0] if args.seeds == 1 else median_over_seeds(per_seed)
            if args.seeds > 1:
                print_medians(name, out[name])
    plot(curves, args.png)
    print(f"\nplot: {args.png}")
    if args.out:
        write_json(out, args.out, cfg, args.margin, args.seeds)
        print(f"results: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
