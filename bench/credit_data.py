"""Synthetic credit-shaped data for the benchmarks: a 23-feature credit table split
vertically, written as CSV at run time (nothing is downloaded).

    bank (active):  id, y, a0..a12   13 dense standardised features and a binary label
    shop (passive): id, b0..b9       10 dense standardised features of the same people

The label is nonlinear in both parties' features (a sine of a bank projection, a
bank x shop interaction, a linear shop term, Gaussian noise), so neither party alone
predicts it well. The same `rows` and `seed` give the same files, byte for byte. Used by
bench/predict.py, bench/secure_epoch.py, bench/accuracy.py and bench/checkpoint.py;
`credit_job` is the job spec of the first two (out_dim 16, top [32], batch 256).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from vfl.contract.spec import TableSource

from bench.jobs import binary_model, job_spec, table_data

BANK_FEATURES, SHOP_FEATURES = 13, 10


def credit_arrays(
    rows: int, seed: int = 0, positives: float | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bank features, shop features, labels) for `rows` people, each column with mean 0
    and standard deviation 1; with `positives`, the label is 1 for that fraction of the
    rows with the largest noisy logit (else for a logit above 0, about half)."""
    rng = np.random.default_rng(seed)
    xa, xb = rng.normal(size=(rows, BANK_FEATURES)), rng.normal(size=(rows, SHOP_FEATURES))
    wa, wb = rng.normal(size=BANK_FEATURES), rng.normal(size=SHOP_FEATURES)
    logit = np.sin(xa @ wa / 2) + (xa[:, :3].sum(1) * xb[:, :3].sum(1)) / 3 + xb @ wb / 4
    noisy = logit + rng.normal(scale=0.5, size=rows)
    cut = 0.0 if positives is None else float(np.quantile(noisy, 1 - positives))
    y = (noisy > cut).astype(int)
    return _standardised(xa), _standardised(xb), y


# the scorecard-shaped label's weights per column (bank a0.., shop b0..): strong to none
SCORECARD_BANK = (1.0, 0.8, 0.6, 0.5, 0.4, 0.3, 0.25, 0.2, 0.15, 0.1, 0.0, 0.0, 0.0)
SCORECARD_SHOP = (0.7, 0.5, 0.35, 0.25, 0.15, 0.1, 0.0, 0.0, 0.0, 0.0)


def scorecard_arrays(rows: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The credit shape with a label as credit scorecards assume it: log-odds that add up
    one effect per column (monotone: the column itself, or its tanh, by turns), with
    weights from strong to none (`SCORECARD_BANK`, `SCORECARD_SHOP`; 6 columns carry
    nothing), logistic noise, and about 22% events (the UCI credit default table's
    rate). Where `credit_arrays`' label is a sine of a projection, which no column
    predicts alone, here each column's signal is its own: the table on which a one-column
    screen such as IV is meant to work."""
    rng = np.random.default_rng(seed)
    xa, xb = rng.normal(size=(rows, BANK_FEATURES)), rng.normal(size=(rows, SHOP_FEATURES))

    def effects(x: np.ndarray, weights: tuple[float, ...]) -> np.ndarray:
        shaped = np.where(np.arange(x.shape[1]) % 2 == 0, np.tanh(x), x)
        return shaped @ np.asarray(weights)

    logit = effects(xa, SCORECARD_BANK) + effects(xb, SCORECARD_SHOP)
    noisy = logit + rng.logistic(size=rows)
    y = (noisy > np.quantile(noisy, 1 - 0.22)).astype(int)
    return _standardised(xa), _standardised(xb), y


def _standardised(x: np.ndarray) -> np.ndarray:
    return (x - x.mean(axis=0)) / x.std(axis=0)


def credit_tables(
    folder: Path, rows: int = 30_000, seed: int = 0, positives: float | None = None
) -> dict[str, TableSource]:
    """Write bank.csv and shop.csv into `folder`; return each party's table (`positives`:
    as `credit_arrays`)."""
    xa, xb, y = credit_arrays(rows, seed, positives)
    ids = np.arange(rows)
    bank, shop = folder / "bank.csv", folder / "shop.csv"
    _write(bank, ["id", "y", *(f"a{i}" for i in range(BANK_FEATURES))], [ids, y], xa)
    _write(shop, ["id", *(f"b{i}" for i in range(SHOP_FEATURES))], [ids], xb)
    return {
        "bank": TableSource(path=str(bank), id="id", label="y"),
        "shop": TableSource(path=str(shop), id="id"),
    }


def credit_job(
    protocol: str,
    tables: dict[str, TableSource],
    key_bits: int,
    epochs: int,
    validation: dict,
    *,
    out_dim: int = 16,
    hidden: list[int] | None = None,
    batch: int = 256,
) -> dict:
    """The job spec (as a dict) that trains on `credit_tables`: bank active, shop passive,
    a source layer of `out_dim`, a binary top of `hidden` ([32] if None), test keys below
    2048 bits."""
    return job_spec(
        f"credit-{protocol}",
        protocol,
        table_data(tables["bank"]),
        table_data(tables["shop"]),
        key_bits=key_bits,
        model=binary_model(out_dim, [32] if hidden is None else hidden),
        train={"epochs": epochs, "batch_size": batch},
        validation=validation,
    )


def _write(path: Path, header: list[str], ints: list[np.ndarray], x: np.ndarray) -> None:
    np.savetxt(
        path,
        np.column_stack([*ints, x]),
        delimiter=",",
        header=",".join(header),
        comments="",
        fmt=["%d"] * len(ints) + ["%.6f"] * x.shape[1],
    )


def write_credit_tables(
    folder: Path, rows: int, fmt: str = "csv", seed: int = 0, chunk: int = 1_000_000
) -> dict[str, TableSource]:
    """The credit shape at any size, written `chunk` rows at a time (the bench process
    never holds the whole table): bank.<fmt> and shop.<fmt> in `folder`, ids "0".."rows-1".
    Each chunk draws its own rows; the weights of the label are the seed's. Columns are
    N(0, 1) by construction (not standardised afterwards, unlike `credit_arrays`)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    wa, wb = rng.normal(size=BANK_FEATURES), rng.normal(size=SHOP_FEATURES)
    paths = {p: folder / f"{p}.{fmt}" for p in ("bank", "shop")}
    writers: dict[str, pacsv.CSVWriter | pq.ParquetWriter] = {}
    for n, lo in enumerate(range(0, rows, chunk)):
        size = min(chunk, rows - lo)
        draw = np.random.default_rng([seed, n])
        xa, xb = draw.normal(size=(size, BANK_FEATURES)), draw.normal(size=(size, SHOP_FEATURES))
        logit = np.sin(xa @ wa / 2) + (xa[:, :3].sum(1) * xb[:, :3].sum(1)) / 3 + xb @ wb / 4
        y = (logit + draw.normal(scale=0.5, size=size) > 0).astype(np.int8)
        ids = pa.array(np.arange(lo, lo + size).astype(str))
        tables = {
            "bank": pa.table(
                {
                    "id": ids,
                    "y": y,
                    **{f"a{i}": np.round(xa[:, i], 6) for i in range(BANK_FEATURES)},
                }
            ),
            "shop": pa.table(
                {"id": ids, **{f"b{i}": np.round(xb[:, i], 6) for i in range(SHOP_FEATURES)}}
            ),
        }
        for party, table in tables.items():
            if party not in writers:
                writers[party] = (
                    pacsv.CSVWriter(paths[party], table.schema)
                    if fmt == "csv"
                    else pq.ParquetWriter(paths[party], table.schema)
                )
            writers[party].write_table(table)
    for writer in writers.values():
        writer.close()
    return {
        "bank": TableSource(path=str(paths["bank"]), format=fmt, id="id", label="y"),
        "shop": TableSource(path=str(paths["shop"]), format=fmt, id="id"),
    }


def credit_held_out(
    folder: Path,
    rows: int,
    seed: int = 0,
    test_fraction: float = 0.2,
    step: float | None = None,
    scorecard: bool = False,
) -> tuple[dict[str, tuple[TableSource, str]], dict[str, np.ndarray]]:
    """`credit_arrays` rows split into training rows and held-out test rows, written as
    bank.csv / bank_test.csv and shop.csv / shop_test.csv in `folder`; with `step`, every
    feature rounded to a multiple of it within +-15 steps (few distinct values, so any
    binning of at least 31 bins is exact). Returns each party's (training table, test
    file) and the pooled arrays: `x`, `y` (training rows), `x_test`, `y_test`, `ids_test`
    (ids as text). With `scorecard`, the rows of `scorecard_arrays`."""
    xa, xb, y = scorecard_arrays(rows, seed) if scorecard else credit_arrays(rows, seed)
    if step is not None:
        xa, xb = (np.clip(np.round(x / step), -15, 15) * step for x in (xa, xb))
    cut = rows - int(round(rows * test_fraction))
    ids = np.arange(rows)
    bank_head = ["id", "y", *(f"a{i}" for i in range(BANK_FEATURES))]
    shop_head = ["id", *(f"b{i}" for i in range(SHOP_FEATURES))]
    for suffix, part in (("", slice(0, cut)), ("_test", slice(cut, rows))):
        _write(folder / f"bank{suffix}.csv", bank_head, [ids[part], y[part]], xa[part])
        _write(folder / f"shop{suffix}.csv", shop_head, [ids[part]], xb[part])
    tables = {
        "bank": (
            TableSource(path=str(folder / "bank.csv"), label="y"),
            str(folder / "bank_test.csv"),
        ),
        "shop": (TableSource(path=str(folder / "shop.csv")), str(folder / "shop_test.csv")),
    }
    x = np.hstack([xa, xb])
    pooled = {
        "x": x[:cut],
        "y": y[:cut],
        "x_test": x[cut:],
        "y_test": y[cut:],
        "ids_test": ids[cut:].astype(str),
    }
    return tables, pooled
