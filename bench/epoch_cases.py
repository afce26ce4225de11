"""The cases of bench/secure_epoch.py: each one's job spec, and the counts of its
secure layer's cryptography (the floor) on the rows of the run (bench/floor.py).

    credit  bench/credit_data.py, `--rows` rows, 20 % validated; MatMul, out_dim 16
    a9a     the shared a9a split (VFL_SHARED_DATA), tested on a9a.t; MatMul, out_dim 1
    ctr     synthetic CTR (celu.synth_ctr), `--ctr-rows` rows; Embed-MatMul, one epoch
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from vfl.celu.synth_ctr import CATEGORICAL_FIELDS, generate, write_csv

from bench.credit_data import credit_arrays, credit_job, credit_tables
from bench.floor import Counts, EmbedCounter, MatmulCounter
from bench.jobs import binary_model, ctr_data, job_spec

SHARED = Path(os.environ.get("VFL_SHARED_DATA", "/work/shared/data"))
BATCH = 256
CTR = {"out_dim": 16, "embedding_dim": 8, "vocab": 1000, "val_fraction": 0.1}


# --- Cases ----------------------------------------------------------------------------
def credit_spec(protocol: str, args, folder: Path) -> dict:
    tables = credit_tables(folder, args.rows)
    rounds = -(-int(args.rows * 0.8) // BATCH)
    validation = {"fraction": 0.2, "every": rounds}
    return credit_job(protocol, tables, args.key_bits, args.epochs, validation, batch=BATCH)


def a9a_spec(protocol: str, args, folder: Path) -> dict:
    def data(side: str, **label: str) -> dict:
        path, test = SHARED / "a9a" / f"a9a.{side}", SHARED / "a9a" / f"a9a.t.{side}"
        return {"path": str(path), "test_path": str(test), "format": "libsvm", **label}

    return job_spec(
        f"a9a-{protocol}",
        protocol,
        data("guest", label="y"),
        data("host"),
        key_bits=args.key_bits,
        model=binary_model(1, []),
        train={"epochs": args.epochs, "batch_size": BATCH},
        validation={"every": -(-32_561 // BATCH)},
    )


def ctr_spec(protocol: str, args, folder: Path) -> dict:
    rows = args.ctr_rows
    write_csv(folder, rows, seed=0, vocab=CTR["vocab"])
    return job_spec(
        f"ctr-{protocol}",
        protocol,
        *ctr_data(folder),
        key_bits=args.key_bits,
        model=binary_model(CTR["out_dim"], [32], embedding_dim=CTR["embedding_dim"]),
        train={"epochs": 1, "batch_size": BATCH},
        validation={"fraction": CTR["val_fraction"], "every": 10_000},
    )


CASES = {"credit": credit_spec, "a9a": a9a_spec, "ctr": ctr_spec}


# --- Floors ---------------------------------------------------------------------------
def _a9a_arrays() -> tuple:
    from vfl.contract.spec import TableSource
    from vfl.party.tables.load import load_table
    from vfl.party.tables.table import with_columns

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
