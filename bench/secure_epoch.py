"""Secure (blindfl) against plaintext (split) training through real `vfl run` jobs, next
to the cost floor of the secure layer's cryptography.

    python bench/secure_epoch.py                       credit and a9a, 3 epochs, 2048-bit
    python bench/secure_epoch.py --cases credit --epochs 1 --rows 3000 --key-bits 1024
    python bench/secure_epoch.py --cases ctr           the Embed-MatMul layer: s/step, floor
    python bench/secure_epoch.py --cases ctr --ctr-rows 256 --key-bits 1024   (smoke run)
    python bench/secure_epoch.py --modes shared,pinned --out bench/results/secure_epoch.json

Cases:
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
import threading
import time
from pathlib import Path

import numpy as np
from credit_data import credit_arrays, credit_tables
from floor import Counts, EmbedCounter, MatmulCounter, cores, time_primitives
from vfl.celu.synth_ctr import CATEGORICAL_FIELDS, generate, write_csv
from vfl.cli.local import run_local
from vfl.cli.progress import follow
from vfl.contract.spec import parse_spec

SHARED = Path(os.environ.get("VFL_SHARED_DATA", "/work/shared/data"))
BATCH = 256
CTR = {"out_dim": 16, "embedding_dim": 8, "vocab": 1000, "val_fraction": 0.1}


# --- Cases ----------------------------------------------------------------------------
def _crypto(key_bits: int) -> dict:
    return {"key_bits": key_bits, "allow_insecure_test_keys": key_bits < 2048}


def credit_spec(protocol: str, args, folder: Path) -> dict:
    tables = credit_tables(folder, args.rows)
    parties = [
        {"id": pid, "role": role, "data": tables[pid].model_dump(exclude_none=True)}
        for pid, role in (("bank", "active"), ("shop", "passive"))
    ]
    rounds = -(-int(args.rows * 0.8) // BATCH)
    return {
        "job": f"credit-{protocol}",
        "parties": parties,
        "protocol": protocol,
        "crypto": _crypto(args.key_bits),
        "model": {"source": {"out_dim": 16}, "top": {"hidden": [32], "task": "binary"}},
        "train": {"epochs": args.epochs, "batch_size": BATCH},
        "validation": {"fraction": 0.2, "every": rounds},
    }


def a9a_spec(protocol: str, args, folder: Path) -> dict:
    def party(pid: str, role: str, side: str) -> dict:
        data = {
            "path": str(SHARED / "a9a" / f"a9a.{side}"),
            "test_path": str(SHARED / "a9a" / f"a9a.t.{side}"),
            "format": "libsvm",
        }
        return {
            "id": pid,
            "role": role,
            "data": {**data, **({"label": "y"} if role == "active" else {})},
        }

    return {
        "job": f"a9a-{protocol}",
        "parties": [party("bank", "active", "guest"), party("shop", "passive", "host")],
        "protocol": protocol,
        "crypto": _crypto(args.key_bits),
        "model": {"source": {"out_dim": 1}, "top": {"hidden": [], "task": "binary"}},
        "train": {"epochs": args.epochs, "batch_size": BATCH},
        "validation": {"every": -(-32_561 // BATCH)},
    }


def ctr_spec(protocol: str, args, folder: Path) -> dict:
    rows = args.ctr_rows
    write_csv(folder, rows, seed=0, vocab=CTR["vocab"])
    return {
        "job": f"ctr-{protocol}",
        "parties": [
            {
                "id": "bank",
                "role": "active",
                "data": {"path": str(folder / "active.csv"), "label": "y"},
            },
            {
                "id": "shop",
                "role": "passive",
                "data": {
                    "path": str(folder / "passive.csv"),
                    "categorical": list(CATEGORICAL_FIELDS),
                },
            },
        ],
        "protocol": protocol,
        "crypto": _crypto(args.key_bits),
        "model": {
            "source": {"out_dim": CTR["out_dim"], "embedding_dim": CTR["embedding_dim"]},
            "top": {"hidden": [32], "task": "binary"},
        },
        "train": {"epochs": 1, "batch_size": BATCH},
        "validation": {"fraction": CTR["val_fraction"], "every": 10_000},
    }


CASES = {"credit": credit_spec, "a9a": a9a_spec, "ctr": ctr_spec}


# --- Floors ---------------------------------------------------------------------------
def _a9a_arrays() -> tuple:
    from vfl.contract.spec import TableSource
    from vfl.party.data import load_table, with_columns

    def load(side: str, test: bool):
        name = f"a9a.t.{side}" if test else f"a9a.{side}"
        label = "y" if side == "guest" else None
        source = TableSource(path=str(SHARED / "a9a" / name), format="libsvm", label=label)
        return load_table(source, side)

    guest, host = load("guest", False), load("host", False)
    guest_t = with_columns(load("guest", True), guest.feature_names, "a9a.t.guest")
    host_t = with_columns(load("host", True), host.feature_names, "a9a.t.host")
    return guest, host, guest_t, host_t


def matmul_floor(case: str, args) -> dict | None:
    """Counts of an epoch, a validation pass and the setup of the blindfl MatMul layer on
    the rows of this case, in batches as the plan draws them (sizes only matter)."""
    if case == "credit":
        x_b, x_a, _ = credit_arrays(args.rows)
        n_val = int(round(args.rows * 0.2))
        perm = np.random.default_rng([0, 0]).permutation(args.rows)
        train, val = np.sort(perm[n_val:]), np.sort(perm[:n_val])
        xb_t, xa_t, xb_v, xa_v = x_b[train], x_a[train], x_b[val], x_a[val]
        out_dim = 16
    elif case == "a9a":
        guest, host, guest_t, host_t = _a9a_arrays()
        common = np.intersect1d(guest.ids, host.ids)
        xb_t, xa_t = _rows(guest, common), _rows(host, common)
        common_t = np.intersect1d(guest_t.ids, host_t.ids)
        xb_v, xa_v = _rows(guest_t, common_t), _rows(host_t, common_t)
        out_dim = 1
    else:
        return None
    counter = MatmulCounter(args.key_bits, out_dim, xb_t.shape[1], xa_t.shape[1])
    pre_train = counter.precomputed(args.epochs)
    pre_val = counter.precomputed(args.epochs)  # one validation per epoch
    epoch, val = Counts(), Counts()
    for start in range(0, xa_t.shape[0], BATCH):
        part = slice(start, start + BATCH)
        epoch.add(counter.batch(xb_t[part], xa_t[part], train=True, m1=not pre_train))
    for start in range(0, xa_v.shape[0], BATCH):
        part = slice(start, start + BATCH)
        val.add(counter.batch(xb_v[part], xa_v[part], train=False, m1=not pre_val))
    setup = Counts()
    if pre_train:
        setup.add(counter.setup(xa_t.shape[0]))
    if pre_val:
        setup.add(counter.setup(xa_v.shape[0]))
    return {
        "epoch": epoch,
        "validation": val,
        "setup": setup,
        "rows_per_cipher": counter.layout.rows,
        "slots": counter.packer.slots,
        "m1_made_once": {"train": pre_train, "val": pre_val},
    }


def embed_floor(args) -> dict:
    """Counts of the ctr case's epoch (its training batches, by size), its validation pass
    (one forward of every validation row) and its setup (the initial shares, tables of
    max code + 1 rows per field as the data loader sizes them) of the Embed-MatMul layer,
    per party ("active" B, "passive" A) and in total."""
    rows = args.ctr_rows
    n_val = int(round(rows * CTR["val_fraction"]))
    _, passive = generate(rows, 0, vocab=CTR["vocab"])
    vocab = [int(passive[name].max()) + 1 for name in CATEGORICAL_FIELDS]
    counter = EmbedCounter(
        args.key_bits, CTR["out_dim"], CTR["embedding_dim"], len(CATEGORICAL_FIELDS)
    )
    epoch = {"active": Counts(), "passive": Counts()}
    sizes = [min(BATCH, rows - n_val - start) for start in range(0, rows - n_val, BATCH)]
    for n in sizes:
        for role, counts in counter.step(n, train=True).items():
            epoch[role].add(counts)
    per_party = {
        "epoch": epoch,
        "validation": counter.step(n_val, train=False),
        "setup": counter.setup(vocab),
        "step": counter.step(BATCH, train=True),
    }
    return {
        **{what: _both(by_role) for what, by_role in per_party.items()},
        "per_party": per_party,
        "steps": len(sizes),
        "layouts": counter.layouts,
    }


def _both(by_role: dict[str, Counts]) -> Counts:
    total = Counts()
    for counts in by_role.values():
        total.add(counts)
    return total


def _rows(table, ids: np.ndarray):
    index = {v: i for i, v in enumerate(table.ids)}
    return table.features[[index[v] for v in ids]].astype(np.float64)


# --- Running --------------------------------------------------------------------------
class Pinner:
    """Pins each party daemon and every process and thread under it to one core, again
    every 0.2 s (worker processes and threads start during the job)."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(0.2):
            for pid, core in _party_daemons().items():
                for proc in _descendants(pid):
                    for tid in _threads(proc):
                        try:
                            os.sched_setaffinity(tid, {core})
                        except OSError:
                            pass

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def _party_daemons() -> dict[int, int]:
    """pid -> core of this process's party daemons ("party-bank" core 0, the other 1)."""
    out = {}
    for pid in _descendants(os.getpid()):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if " party serve " in cmd:
            out[pid] = 0 if "party-bank" in cmd else 1 % cores()
    return out


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in Path(f"/proc/{p}/task").iterdir():
                todo.extend(int(c) for c in (task / "children").read_text().split())
        except OSError:
            pass
    return out


def _threads(pid: int) -> list[int]:
    try:
        return [int(t.name) for t in Path(f"/proc/{pid}/task").iterdir()]
    except OSError:
        return []


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
        setup = f"{r['setup_seconds']:.1f}" if protocol == "blindfl" else "-"
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
    blind = [r for (p, m), r in results.items() if p == "blindfl"]
    if split and blind:
        ratio = np.mean(blind[0]["epoch_seconds"]) / np.mean(split[0]["epoch_seconds"])
        print(f"secure / plaintext epoch ({list(results)[0][1]} cores): {ratio:.1f}x")


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
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default="credit,a9a", help="comma-separated: credit,a9a,ctr")
    ap.add_argument("--modes", default="shared,pinned", help="comma-separated: shared,pinned")
    ap.add_argument("--protocols", default="split,blindfl")
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
                    spec = CASES[case](protocol, args, Path(tmp))
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
