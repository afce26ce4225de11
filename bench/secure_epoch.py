"""Secure (blindfl) against plaintext (split) training through real `vfl run` jobs, next
to the cost floor of the secure layer's cryptography.

    python -m bench.secure_epoch                       credit and a9a, 3 epochs, 2048-bit
    python -m bench.secure_epoch --cases credit --epochs 1 --rows 3000 --key-bits 1024
    python -m bench.secure_epoch --cases ctr           the Embed-MatMul layer: s/step, floor
    python -m bench.secure_epoch --cases ctr --ctr-rows 256 --key-bits 1024   (smoke run)
    python -m bench.secure_epoch --modes shared,pinned --out bench/results/secure_epoch.json

Cases (their specs and floor counts: bench/epoch_cases.py):
  credit  synthetic credit-shaped table (bench/credit_data.py): N rows (30,000), 13 dense
          standardised features and the label at "bank", 10 at "shop", a nonlinear label;
          20 % held out (6,000 rows validated); source out_dim 16, top [32], batch 256
  a9a     a9a.guest / a9a.host (binary one-hot, 32,561 rows), tested on a9a.t (16,281
          rows); logistic regression: out_dim 1, no hidden top layer, batch 256
  ctr     synthetic CTR (celu.synth_ctr, 26 categorical fields of up to 1,000 codes at
          the passive party, 13 numeric ones and the label at the active party):
          --ctr-rows rows (1,024), 10 % validated; the Embed-MatMul layer (embedding
          k = 8, out_dim 16), top [32], batch 256, one epoch; seconds per step
Modes: "shared" runs every process on all cores (both parties' Paillier work competes
for them); "pinned" pins each party daemon and its workers to a core of its own
(`sched_setaffinity`, what separate machines look like), the coordinator to any core.

Every job validates after each epoch. Reported per case, protocol and mode: seconds per
epoch (the trainer's training clock, validation excluded), seconds of the last
validation pass, validation AUC after epoch 1 and after the last epoch, and for blindfl
the setup (KEYING: keys, shares, and the m1 of rows used twice or more, made once) and the
floor of an epoch and of a validation pass (bench/floor.py): the decryptions, fresh
encryptions, re-randomisations and modular products the MatMul layer needs, counted from
its packing and the rows of this run, times their cost measured here, over the cores.
The machine may be shared: the load average is printed.

The ctr case prints seconds per training step (the epoch over its steps) next to the
floor per step of the Embed-MatMul layer (bench/floor.py, `EmbedCounter`, checked
against the real layer by tests/bench/test_floor_embed.py), and the ratio:

    floor/step = sum over the epoch's batches of
                 (decryptions x t_dec + peer-key obfuscators x t_obf + fresh x t_fresh
                  + products x t_mul + inverses x t_inv) / cores / steps

where, for a batch of n rows, F = 26 fields of k = 8 and h = 16 at 2048 bits (E layout
c_E = 7 plaintexts and s = 26 field segments per row, h layout c_h = 1, D layout c_D =
11): decryptions = re-randomisations = n (c_E + 2 c_h + c_D) + F k c_h (e, c, z, de, y:
5,328 at n = 256), fresh = n c_h + F k c_h + n s (m3, pb, st at B) + F k c_h + h c_D
(phi, phit at A) (7,504), products from the kernel's cost model for the four ciphertext
matrix products (two with n x F k masked 61-bit exponents, one F k x n, one n x h with
|lr G| of `floor.STEP_BITS` bits) plus one per encryption, re-randomisation, addition
and table entry touched, and one inverse per kernel output with a negative term. It also
prints each party's floor for a 256-row step: with one core per party (pinned), the
busiest party's CPU time is a tighter bound than the total over the cores.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from vfl.cli.progress import follow
from vfl.contract.spec import parse_spec
from vfl.local.run import run_local

from bench.epoch_cases import BATCH, CASES, embed_floor, matmul_floor
from bench.floor import Counts, cores, time_primitives
from bench.procs import Pinner


# --- Running --------------------------------------------------------------------------
def run(spec: dict, pinned: bool) -> dict:
    pinner = Pinner() if pinned else None
    try:
        begun = time.perf_counter()
        view = run_local(parse_spec(spec), lambda c, j: follow(c, j, show=False))
        wall = time.perf_counter() - begun
    finally:
        if pinner is not None:
            pinner.close()
    if view.state != "SUCCEEDED":
        raise SystemExit(f"{spec['job']} failed: {view.reason}")
    r = view.to_plain()
    history = r["history"]
    train_s = [h["train_seconds"] for h in history]
    epoch_s = [b - a for a, b in zip([0.0, *train_s[:-1]], train_s, strict=True)]
    val_s = [h["seconds"] - h["train_seconds"] for h in history]
    val_each = [b - a for a, b in zip([0.0, *val_s[:-1]], val_s, strict=True)]
    return {
        "seconds": r["seconds"],
        "wall_seconds": wall,
        "psi_seconds": r.get("psi_seconds"),
        "setup_seconds": r["seconds"] - (r.get("psi_seconds") or 0) - history[-1]["seconds"],
        "epoch_seconds": epoch_s,
        "validation_seconds": val_each,
        "auc": [h.get("auc") for h in history],
        "rounds": r["rounds"],
        "bytes_sent": r.get("bytes_sent"),
    }


# --- Report ---------------------------------------------------------------------------
def print_case(case: str, args, results: dict, floors: dict | None, cost: dict) -> None:
    print(
        f"\n{case}: {args.epochs} epoch(s), batch {BATCH}, {args.key_bits}-bit keys, "
        f"`vfl run`, {cores()} cores"
    )
    print(
        "| protocol | mode | s/epoch | validation s | setup s | AUC epoch 1 | AUC last "
        "| floor s/epoch | epoch / floor | floor validation s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (protocol, mode), r in results.items():
        mean_epoch = float(np.mean(r["epoch_seconds"]))
        fe = fv = ratio = "-"
        if protocol == "blindfl" and floors:
            divisor = cores()
            floor_epoch = floors["epoch"].seconds(cost) / divisor
            fe, ratio = f"{floor_epoch:.1f}", f"{mean_epoch / floor_epoch:.2f}x"
            fv = f"{floors['validation'].seconds(cost) / divisor:.1f}"
        setup = f"{r['setup_seconds']:.1f}" if protocol.startswith("blindfl") else "-"
        auc = r["auc"]
        print(
            f"| {protocol} | {mode} | {mean_epoch:.1f} | {r['validation_seconds'][-1]:.1f} "
            f"| {setup} "
            f"| {auc[0]:.4f} | {auc[-1]:.4f} | {fe} | {ratio} | {fv} |"
        )
    if floors:
        ms = {k: v * 1e3 for k, v in cost.items()}
        e, v, s = floors["epoch"], floors["validation"], floors["setup"]
        print(
            f"floor: {floors['slots']} slots, {floors['rows_per_cipher']} rows per m1/m2 "
            "ciphertext; "
            f"m1 made once: {floors['m1_made_once']}\n"
            f"  epoch: {e.decryptions:,} decryptions x {ms['decrypt']:.2f} ms + {e.obfuscators:,} "
            f"peer-key obfuscators x {ms['obfuscator']:.2f} ms + {e.fresh:,} fresh (m3) x "
            f"{ms['fresh']:.2f} ms + {e.products:,.0f} products x {ms['product'] * 1e3:.1f} us "
            f"= {e.seconds(cost):.1f} s of one core\n"
            f"  validation: {v.decryptions:,} decryptions, {v.obfuscators:,} obfuscators, "
            f"{v.products:,.0f} products = {v.seconds(cost):.1f} s of one core\n"
            f"  setup's m1 (once per job): {s.decryptions:,} decryptions, {s.obfuscators:,} "
            f"obfuscators = {s.seconds(cost):.1f} s of one core"
        )
    split = [r for (p, m), r in results.items() if p == "split"]
    for name in ("blindfl", "blindfl-bfv"):
        blind = [r for (p, m), r in results.items() if p == name]
        if split and blind:
            ratio = np.mean(blind[0]["epoch_seconds"]) / np.mean(split[0]["epoch_seconds"])
            print(f"{name} / split epoch ({list(results)[0][1]} cores): {ratio:.1f}x")


def print_ctr(args, results: dict, floors: dict, cost: dict) -> None:
    """The ctr case: seconds per training step (the epoch's over its steps) against the
    Embed-MatMul layer's floor per step, the validation pass against its floor."""
    steps, divisor = floors["steps"], cores()
    floor_step = floors["epoch"].seconds(cost) / divisor / steps
    floor_val = floors["validation"].seconds(cost) / divisor
    print(
        f"\nctr: 1 epoch of {args.ctr_rows} rows ({steps} steps of at most {BATCH}, then one "
        f"validation pass), {args.key_bits}-bit keys, `vfl run`, {divisor} cores"
    )
    print(
        "| protocol | mode | s/step | floor s/step | step / floor | validation s "
        "| floor validation s | setup s | AUC |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for (protocol, mode), r in results.items():
        step = float(np.mean(r["epoch_seconds"])) / steps
        if protocol == "blindfl":
            fs, ratio, fv = f"{floor_step:.2f}", f"{step / floor_step:.2f}x", f"{floor_val:.2f}"
            setup = f"{r['setup_seconds']:.1f}"
        else:
            fs = ratio = fv = setup = "-"
        print(
            f"| {protocol} | {mode} | {step:.2f} | {fs} | {ratio} "
            f"| {r['validation_seconds'][-1]:.2f} | {fv} | {setup} | {r['auc'][-1]:.4f} |"
        )
    lay = floors["layouts"]
    print(
        f"floor (Embed-MatMul, one passive party): per row {lay['e_cols']} E plaintexts "
        f"({lay['e_slots']} slots), {lay['segments']} field segments, {lay['h_cols']} h "
        f"plaintexts ({lay['h_slots']} slots), {lay['d_cols']} D plaintexts "
        f"({lay['d_slots']} slots)"
    )
    party = floors["per_party"]
    for role, name in (("active", "B"), ("passive", "A")):
        print(f"  step of {BATCH} rows at {name}: {_ops(party['step'][role], cost)}")
    busiest = max(c.seconds(cost) for c in party["step"].values())
    print(
        f"  step of {BATCH} rows: {floors['step'].seconds(cost):.2f} s of one core, "
        f"{floors['step'].seconds(cost) / divisor:.2f} s on {divisor} cores; one core per "
        f"party (pinned): the busiest party alone needs {busiest:.2f} s"
    )
    print(f"  epoch: {_ops(floors['epoch'], cost)}")
    print(f"  validation: {_ops(floors['validation'], cost)}")
    print(f"  setup (initial shares, once per job): {_ops(floors['setup'], cost)}")


def _ops(c: Counts, cost: dict) -> str:
    ms = {k: v * 1e3 for k, v in cost.items()}
    return (
        f"{c.decryptions:,} decryptions x {ms['decrypt']:.2f} ms + {c.obfuscators:,} peer-key "
        f"obfuscators x {ms['obfuscator']:.2f} ms + {c.fresh:,} fresh x {ms['fresh']:.2f} ms "
        f"+ {c.products:,.0f} products x {ms['product'] * 1e3:.1f} us + {c.inverses:,} "
        f"inverses x {ms['inverse'] * 1e3:.1f} us = {c.seconds(cost):.2f} s of one core"
    )


def _plain(value):
    """Counts (also inside dicts) as plain dicts, for the JSON report."""
    if isinstance(value, Counts):
        return dict(value.__dict__)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def main() -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.secure_epoch", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--cases", default="credit,a9a", help="comma-separated: credit,a9a,ctr")
    ap.add_argument("--modes", default="shared,pinned", help="comma-separated: shared,pinned")
    ap.add_argument("--protocols", default="split,blindfl", help="split,blindfl,blindfl-bfv")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--rows", type=int, default=30_000, help="credit rows")
    ap.add_argument("--ctr-rows", type=int, default=1_024, help="ctr rows (one epoch)")
    ap.add_argument("--key-bits", type=int, default=2048)
    ap.add_argument("--out", type=Path, help="write results as JSON")
    args = ap.parse_args()
    cost = time_primitives(args.key_bits)
    report: dict = {"primitive_seconds": cost, "cores": cores(), "cases": {}}
    for case in args.cases.split(","):
        results: dict = {}
        load = [os.getloadavg()[0]]
        for protocol in args.protocols.split(","):
            for mode in args.modes.split(","):
                with tempfile.TemporaryDirectory(prefix=f"bench-{case}-") as tmp:
                    spec = CASES[case](protocol.removesuffix("-bfv"), args, Path(tmp))
                    if protocol == "blindfl-bfv":  # crypto: {scheme: bfv}
                        spec["crypto"] = {**spec.get("crypto", {}), "scheme": "bfv"}
                    results[(protocol, mode)] = run(spec, mode == "pinned")
                load.append(os.getloadavg()[0])
        if case == "ctr":
            floors = embed_floor(args)
            print_ctr(args, results, floors, cost)
        else:
            floors = matmul_floor(case, args)
            print_case(case, args, results, floors, cost)
        print(f"load average (1 min) before and after each run: {[round(x, 1) for x in load]}")
        report["cases"][case] = {
            "results": {f"{p}/{m}": r for (p, m), r in results.items()},
            "floor": _plain(floors),
            "load": load,
        }
    if args.out:
        args.out.write_text(json.dumps(report, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
