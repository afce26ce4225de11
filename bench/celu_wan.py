"""CELU-VFL vs FedBCD vs vanilla VFL over an emulated WAN, on synthetic CTR data.

    python bench/celu_wan.py [--quick] [--out results.json] [--png auc.png] [--profile P]
                             [--seeds N]

Each run is a real `vfl run` topology (coordinator and two party daemons as processes,
gRPC on loopback) with the job's `network` profile shaping every data-plane envelope
(serialisation time by size plus half the RTT, per direction). The model is WDL-like:
embeddings + MLP at the passive party (26 categorical fields), an MLP at the active
party (13 numeric fields), an MLP top model.

The regime is the CELU-VFL paper's: plenty of rows, one pass over them, 4096-row batches,
Adagrad at lr 0.05, so that training is limited by model updates (each round's statistics
can carry several), not by data. 1M rows (90% train), vocab 100 per field, one epoch: 220
rounds; vanilla is still climbing at the end (AUC 0.74; the hidden model allows ~0.84).

What is compared, and why it is fair. Sweeps ran in-process (tests/harness.py, the
deterministic ``sync`` schedule, seed 0, no WAN) on exactly the benchmark's rows, batches
and initial weights; rounds to vanilla's final AUC - 0.002 = 0.7384, validated every 10:

- Every mode trains the same model with the same optimiser and lr: Adagrad at 0.05, the
  authors' choice and vanilla's best (lr 0.1 ends at 0.716, lr 0.2 kills the ReLUs).
- FedBCD gets its best Q: Q=1 reaches the target in 160 rounds, Q=2 in 210, Q=4 never
  (it ends at 0.701, below vanilla).
- CELU: the default W5 R5 xi 0.5 takes 80 rounds (2.6x vanilla); the tuned setting W5 R8
  xi 0.5 50 (4.2x). Others: W5R12 60, W5R16 80, W10R8 80, W3R8 90; W5R8 with xi 0.7 70,
  xi 0.9 80, no weighting 110. Every CELU variant ends 0.008-0.032 above vanilla.
- Both CELU settings run the ``async`` schedule (local updates overlap the WAN wait) with
  ``steps = R-1``, so a round may run every use the table allows.
- A round is 4096 x 16 float32 = 256 KiB each way: on the slow profile about
  2 x (105 + 25) ms, time in which both parties' R-1 local updates fit on 2 cores.

Measured through `vfl run` (bench/results/celu_wan.*, 24 minutes): on the slow profile
vanilla needs all 220 rounds (59.8 s), both CELU settings 80 (23.1 s, 2.6x); FedBCD never
gets there (its Q=1 curve swings by up to 0.07 AUC late in the run and ends at 0.698).
The same settings with the ``sync`` schedule through `vfl run` (local updates right after
each round, off the overlap) took 0.37 s (W5R8) and 0.33 s (W5R5) per round and reached
the target at round 70 (26.3 s) and 100 (33.1 s): overlapping pays. Those runs also show
that the in-process sweep's 50 rounds for W5R8 do not carry over: rounds to target move
by 10-20 between runs of the same settings, as between seeds (most likely float
summation order, which differs between one process and separate daemons, amplified over
hundreds of updates). On the 100 Mbit/s profile a round is 76 ms and the tuned setting's
local updates no longer all fit in it (5.5 of 7 at the active party). Over train seeds
0-2 through `vfl run` on the slow profile (``--seeds 3``, bench/results/celu_wan_seeds3.*)
CELU W5R5 is 2.62, 1.62 and 1.83x vanilla (median 1.83) and W5R8 2.29, 1.39 and 2.18x
(median 2.18); FedBCD never reaches a target.

Regimes tried and rejected (vanilla vs CELU W5R8, rounds to target): 1M rows with vocab
1000 (1.6x: rare values learn slowly for every mode); 8192-row batches (3.7x, vanilla
ends at 0.695); 16-wide embeddings and 128 hidden units (vanilla ends lower, 0.721); the
previous configuration, 100k rows with vocab 10 for 10 epochs of 1024-row batches, where
vanilla plateaus and re-used statistics are worth little (1.2x, default CELU stalls at
0.73), and 200k rows with vocab 1000 for 2 epochs (1.0x, everything over-fits after one).

How far from the issue's 6x, and why (session 4, same in-process sync harness):

- Seeds (shuffling and initial weights; the data stay seed 0), rounds to each seed's own
  target, vanilla / W5R5 / W5R8: seed 0 220/80/50, seed 1 220/150/90, seed 2 180/90/70,
  seed 3 210/100/70. Speedups: W5R5 2.8, 1.5, 2.0, 2.1x; W5R8 4.2 (the earlier 4.2x),
  2.4, 2.6, 3.0x. Seed 0 is the lucky draw; the median is about 2.8x for W5R8.
- With R uses per cached batch a round carries at most R model updates (one fresh, R-1
  local), so 6x needs stale updates nearly as good as fresh ones at R=6..8. Larger R
  does not help (R12 60 rounds, R16 80): every CELU variant flattens at 0.76-0.77 AUC
  (220 batches, each reused), while vanilla is still climbing.
- Optimiser and initialisation, vanilla's final AUC and CELU W5R5's speedup: Adam lr
  0.003 0.757, 2.4x; Adam 0.001 0.695, 3.7x; SGD lr 1.0 0.647, 3.8x and lr 0.3 0.623,
  4.0x (a baseline 0.1 AUC below Adagrad's is not a fair one); the authors' N(0, 0.01)
  initialisation with a linear top model, vanilla 0.688, W5R5 never, W5R8 2.0x; the same
  with a 32-unit top 0.681, W5R5 1.2x.
- Weighting the passive party's overlapped round update by the activation cosine (its
  derivative predates its worker's local updates), through `vfl run`: W5R5 90 rounds and
  W5R8 70 against 80 and 80 without, within run-to-run noise; not kept.

``--quick`` (3 minutes) trains 100k rows in 44 rounds of 2048: it shows that everything
runs, not the regime. ``--profile`` runs one profile only. ``--seeds N`` trains every mode
with train seeds 0..N-1 (shuffling and initial weights; the rows stay the same) and
reports each seed's table, then the medians: rounds to target move by 10-20 between
seeds, so one seed's speedup is one draw.

The target AUC of a profile is set just below the vanilla run's final AUC (minus
`--margin`); rounds and seconds to target come from the validation history, with
validation time left out of the seconds (local updates pause while validating). When a
mode never reaches the target, the speedup over it is a lower bound (printed as ">x"):
its whole training time divided by the faster mode's time to target.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from vfl.celu.synth_ctr import CATEGORICAL_FIELDS, write_csv
from vfl.cli.progress import follow
from vfl.contract.spec import parse_spec
from vfl.local.run import run_local

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
            "source": {"out_dim": cfg.out_dim, "hidden": [64], "embedding_dim": 8},
            "top": {"hidden": [32], "task": "binary"},
        },
        "local_updates": mode,
        "train": {
            "epochs": cfg.epochs,
            "batch_size": cfg.batch_size,
            "lr": cfg.lr,
            "optimizer": cfg.optimizer,
            "seed": seed,
            "timeout_s": 1800.0,  # aligning a million ids takes minutes on 2 shared cores
        },
        "validation": {"fraction": 0.1, "every": cfg.every},
        "network": {"bandwidth_mbps": profile[0], "rtt_ms": profile[1]},
    }


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
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
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
