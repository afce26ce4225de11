"""CELU-VFL vs FedBCD vs vanilla VFL over an emulated WAN, on synthetic CTR data.

    python bench/celu_wan.py [--quick] [--out results.json] [--png auc.png]

Each run is a real `vfl run` topology (coordinator and two party daemons as processes,
gRPC on loopback) with the job's `network` profile shaping every data-plane envelope
(serialisation time by size plus half the RTT, per direction). The model is WDL-like:
embeddings + MLP at the passive party (26 categorical fields), an MLP at the active
party (13 numeric fields), an MLP top model.

What is compared, and why it is fair (numbers from in-process runs of this configuration
through tests/harness.py: same rows and batches; the lr, optimiser and Q sweeps with
another draw of initial weights, the xi sweep with the benchmark's):

- Every mode trains the same model on the same rows and batches with the same optimiser
  and learning rate: Adagrad, lr 0.05, the CELU-VFL authors' choice and the platform's
  default. It is vanilla's best Adagrad lr: after 10 epochs vanilla reaches AUC 0.772 at
  lr 0.05, 0.758 at lr 0.1 (behind all the way) and 0.745 at lr 0.02.
- Not Adam: vanilla with Adam at its best lr (0.02) gets to AUC 0.77 about 1.3x sooner
  than with Adagrad and goes on to 0.78-0.79, but CELU (W5R5 and W5R8) diverges to AUC
  0.5 within 40 rounds at that lr, most likely because the passive party re-applies the
  same stale derivative up to R times and Adam turns that into R full-size steps (under
  Adagrad the accumulated squares damp them).
- Vanilla trains to a plateau: 100k rows (vocab 10: the hidden interactions are
  learnable without over-fitting), 10 epochs of 1024-row batches (880 rounds); its AUC
  moves by about 0.003 over the last 250 rounds. Every mode trains the same rounds.
- FedBCD gets its best Q of {1, 2, 4} at this lr: Q=2 (AUC at round 440: Q1 0.723,
  Q2 0.733, Q4 0.686 and stalled; vanilla 0.750).
- CELU runs the default W=5, R=5, xi=0.5 and one tuned setting, W=5, R=8, xi=0.9. With
  this model's initial weights every variant with xi=0.5 or without weighting (R 3/5/8,
  W 2/5) stalls at AUC 0.73-0.75, before the jump vanilla makes near round 350 when it learns
  the categorical interactions; a strict xi (0.9-0.95), which drops instances whose
  statistics moved, gets past it. Both use the ``async`` schedule (local updates overlap
  the WAN wait) with ``steps = R-1``, so a round may run every use the table allows.
- The cut layer is 16 wide and a batch 1024 rows: a round is 64 KiB each way, on the slow
  profile about 2 x (26 ms + 25 ms), mostly latency, the regime CELU is for; the full run
  takes about 12 minutes on 2 shared cores, ``--quick`` about 2 (its vanilla is far from
  converged, so its ratios only show that everything runs).

Other regimes tried, none fairer or better for CELU: 60k rows with 512-row batches
(vanilla over-fits after 8 epochs; CELU W5R5 1.4x); 200k rows with 4096-row batches and
Adam (CELU 2x over vanilla at lr 0.01, but vanilla is faster at 0.02, where CELU
diverges); 200k rows, 1024-row batches, Adagrad (CELU W5R5 1.0x-1.7x depending on the
initial weights). Even an oracle without staleness (each batch re-used 5 times,
centrally, fresh statistics) reached vanilla's plateau only 3.5x sooner at 4096-row
batches and was worse than vanilla at 512, so the issue's 6x is out of reach here.

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

from celu.synth_ctr import CATEGORICAL_FIELDS, write_csv
from coordinator.cli.local import run_local
from coordinator.cli.progress import follow
from coordinator.spec import parse_spec

MODES: dict[str, dict[str, object]] = {
    "vanilla": {"mode": "none"},
    "fedbcd": {"mode": "fedbcd", "steps": 2},  # best of Q in {1, 2, 4}, see the docstring
    "celu": {"mode": "celu", "workset": 5, "reuse": 5, "xi": 0.5, "schedule": "async", "steps": 4},
    "celu-tuned": {
        "mode": "celu",
        "workset": 5,
        "reuse": 8,
        "xi": 0.9,
        "schedule": "async",
        "steps": 7,
    },
}
PROFILES = {"lan-ish 100Mbps/10ms": (100.0, 10.0), "wan 20Mbps/50ms": (20.0, 50.0)}
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


FULL = BenchConfig(rows=100_000, vocab=10, epochs=10, batch_size=1024, every=20)
QUICK = BenchConfig(rows=30_000, vocab=10, epochs=4, batch_size=1024, every=10)


def job_spec(
    data: Path, mode: dict[str, object], profile: tuple[float, float], cfg: BenchConfig
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
            "seed": 0,
        },
        "validation": {"fraction": 0.1, "every": cfg.every},
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


def fmt_speedup(row: dict, base: str) -> str:
    if f"speedup_vs_{base}" in row:
        return f"{row[f'speedup_vs_{base}']:.2f}"
    if f"speedup_vs_{base}_at_least" in row:
        return f">{row[f'speedup_vs_{base}_at_least']:.2f}"
    return "-"


def print_table(name: str, rows: dict[str, dict]) -> None:
    print(f"\n{name}  (target AUC {rows['vanilla']['target_auc']})")
    print(
        f"{'mode':<10} {'rounds→tgt':>10} {'sec→tgt':>8} {'train s':>8} {'final AUC':>9} "
        f"{'MB sent':>8} {'local upd/round':>15} {'× vanilla':>9} {'× fedbcd':>8}"
    )
    for mode, r in rows.items():
        rounds = "-" if r["rounds_to_target"] is None else str(r["rounds_to_target"])
        secs = "-" if r["seconds_to_target"] is None else f"{r['seconds_to_target']:.1f}"
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


def write_json(out: dict[str, dict], path: Path, cfg: BenchConfig, margin: float) -> None:
    """The summary without the per-validation histories (the PNG has the curves)."""
    slim = {
        p: {m: {k: v for k, v in r.items() if k != "history"} for m, r in rows.items()}
        for p, rows in out.items()
    }
    meta = {"config": cfg.__dict__, "margin": margin, "modes": MODES}
    path.write_text(json.dumps({"bench": meta, "profiles": slim}, indent=2))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small data, a few minutes")
    ap.add_argument("--out", type=Path, help="write results as JSON")
    ap.add_argument("--png", type=Path, default=Path("celu_wan.png"))
    ap.add_argument("--margin", type=float, default=0.002, help="target = vanilla AUC - margin")
    args = ap.parse_args()
    cfg = QUICK if args.quick else FULL
    out: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        write_csv(tmp, cfg.rows, seed=0, vocab=cfg.vocab)
        for name, profile in PROFILES.items():
            results = {}
            for mode, lu in MODES.items():
                print(f"running {mode} on {name} ...", file=sys.stderr, flush=True)
                results[mode] = run_one(job_spec(Path(tmp), lu, profile, cfg))
            out[name] = summarise(results, args.margin)
            print_table(name, out[name])
    plot(out, args.png)
    print(f"\nplot: {args.png}")
    if args.out:
        write_json(out, args.out, cfg, args.margin)
        print(f"results: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
