"""Synthetic raw tables for the preprocessing benchmark: a credit-shaped table as a bank
and a shop hold it (raw amounts, ages, status codes, words, empty cells), split
vertically, written as CSV at run time (nothing is downloaded).

    bank (active):  id, y, limit_bal, age, pay_0, pay_2, pay_3, bill_amt1, bill_amt2,
                    pay_amt1 [, education]
    shop (passive): id, spend_12m, basket_avg, orders_12m, days_since_order,
                    instalments [, city]

    limit_bal, bill_amt*, pay_amt1, spend_12m, basket_avg   lognormal amounts (heavy tails;
                                                            limits and bills in the
                                                            hundreds of thousands)
    age                     integers 21..75
    pay_*                   repayment status codes, integers -2..8 (most -2..0)
    orders_12m, instalments, days_since_order   counts and days (integers)
    education, city         words (messy variant only)

Variants (`VARIANTS`), all of the same rows and labels:

    raw           the numbers as held: amounts with cents, integer codes and counts
    standardised  every feature column z-scored by hand over the whole table (mean 0,
                  standard deviation 1, six decimals), as a user would before
                  `preprocess: none`
    messy         raw plus a words column at each party (bank: education; shop: city)
                  and about 2% empty cells spread over the feature columns (never id or y)

The label (about 21% positives) depends on both parties: utilisation (a ratio of two bank
amounts, through a tanh), delinquency codes, a U-shape in age, an interaction of the
bank's utilisation with the shop's (log) spend, the shop's recency and basket, and both
words columns (which the raw and standardised variants do not carry). Neither party
alone predicts it well; both together reach an AUC near 0.8 on a sensibly preprocessed
table (`python -m bench.raw_data` prints those AUCs of a logistic model on the ideal
features). The same `rows`, `seed` and `variant` give the same files, byte for byte.
Used by bench/raw_tables.py.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from vfl.contract.spec import TableSource

VARIANTS = ("raw", "standardised", "messy")
EMPTY_SHARE = 0.02
EDUCATION = ("graduate school", "university", "high school", "other")
CITIES = ("Lisbon", "Porto", "Braga", "Coimbra", "Faro", "Aveiro")
WORDS = {"bank": "education", "shop": "city"}


@dataclass(frozen=True)
class Column:
    """One feature column: its values (float64, or words as an object array) and how the
    raw CSV writes it (`fmt`: "%.2f", "%d" or "word")."""

    values: np.ndarray
    fmt: str


@dataclass(frozen=True)
class RawRows:
    """Every party's feature columns (words included), the labels, each party's empty-cell
    mask (rows x its columns, in column order) and the ideal features the label is made of
    (for the calibration in `main`)."""

    columns: dict[str, dict[str, Column]]
    labels: np.ndarray
    empty: dict[str, np.ndarray]
    ideal: dict[str, np.ndarray]


def raw_rows(rows: int, seed: int = 0) -> RawRows:
    """The rows behind every variant (all drawn whatever the variant, so the variants
    share them)."""
    rng = np.random.default_rng(seed)
    n = rows

    # bank
    age = 21 + np.round(rng.beta(2.0, 3.0, n) * 54)
    limit = np.maximum(10_000, np.round(np.exp(rng.normal(11.9 + 0.01 * (age - 40), 0.75, n)), -4))
    util = np.clip(rng.beta(1.6, 2.2, n) * 1.15, 0.0, None)
    bill1 = limit * util * np.exp(rng.normal(0.0, 0.08, n))
    bill2 = bill1 * np.exp(rng.normal(0.0, 0.25, n))
    pay_share = np.exp(rng.normal(-2.3, 1.0, n))  # a payment as a share of last bill
    pay_amt = np.round(bill2 * pay_share + np.exp(rng.normal(6.0, 1.0, n)), 2)
    risk = rng.normal(size=n)
    status = [
        np.clip(np.floor(1.1 * risk + rng.normal(0.0, 0.8, n) - 0.6 - 0.3 * k), -2, 8)
        for k in range(3)
    ]
    education = rng.choice(len(EDUCATION), size=n, p=[0.35, 0.46, 0.16, 0.03])

    # shop
    spend = np.exp(rng.normal(9.6, 1.2, n))
    basket = np.exp(rng.normal(4.4, 0.6, n))
    orders = rng.poisson(np.clip(spend / basket, 0, 5_000) / 4)
    days = np.floor(rng.exponential(60.0, n))
    instalments = rng.poisson(np.clip(0.4 + 0.7 * util + 0.3 * (spend > 30_000), 0, None))
    city = rng.choice(len(CITIES), size=n, p=[0.32, 0.24, 0.14, 0.12, 0.10, 0.08])

    # the label
    z_spend = (np.log(spend) - 9.6) / 1.2
    ratio = np.log(bill1 / limit + 0.02)
    late = np.clip(status[0], 0, 3) + 0.5 * np.clip(status[1], 0, 3)
    edu_effect = np.array([-0.45, 0.0, 0.45, 0.8])[education]
    city_effect = np.array([0.5, -0.3, 0.1, -0.5, 0.7, 0.0])[city]
    logit = (
        1.2 * np.tanh(1.5 * (util - 0.55))
        + 0.55 * late
        + 0.5 * ((age - 45) / 14) ** 2
        + 1.5 * z_spend * np.tanh(2 * (util - 0.45))
        + 0.6 * np.tanh((days - 90) / 60)
        - 0.35 * (np.log(basket) - 4.4) / 0.6
        - 0.25 * np.log1p(instalments)
        - 0.3 * np.log(pay_share + 0.05)
        + edu_effect
        + city_effect
    )
    logit = logit - np.quantile(logit, 0.87)
    y = (rng.random(n) < 1 / (1 + np.exp(-1.6 * logit))).astype(np.int64)

    bank = {
        "limit_bal": Column(limit, "%d"),
        "age": Column(age, "%d"),
        "pay_0": Column(status[0], "%d"),
        "pay_2": Column(status[1], "%d"),
        "pay_3": Column(status[2], "%d"),
        "bill_amt1": Column(np.round(bill1, 2), "%.2f"),
        "bill_amt2": Column(np.round(bill2, 2), "%.2f"),
        "pay_amt1": Column(pay_amt, "%.2f"),
        "education": Column(np.array(EDUCATION, dtype=object)[education], "word"),
    }
    shop = {
        "spend_12m": Column(np.round(spend, 2), "%.2f"),
        "basket_avg": Column(np.round(basket, 2), "%.2f"),
        "orders_12m": Column(orders.astype(np.float64), "%d"),
        "days_since_order": Column(days, "%d"),
        "instalments": Column(instalments.astype(np.float64), "%d"),
        "city": Column(np.array(CITIES, dtype=object)[city], "word"),
    }
    empty = {p: rng.random((n, len(c))) < EMPTY_SHARE for p, c in (("bank", bank), ("shop", shop))}
    ideal = {
        "bank": np.column_stack([ratio, late, ((age - 45) / 14) ** 2, np.log(pay_share + 0.05)]),
        "shop": np.column_stack([z_spend, np.tanh((days - 90) / 60), np.log(basket)]),
        "words": np.column_stack([np.eye(4)[education], np.eye(6)[city]]),
        "cross": (z_spend * np.tanh(2 * (util - 0.45)))[:, None],
    }
    return RawRows({"bank": bank, "shop": shop}, y, empty, ideal)


def raw_tables(
    folder: Path, rows: int = 30_000, seed: int = 0, variant: str = "raw"
) -> dict[str, TableSource]:
    """Write bank.csv and shop.csv of `variant` (one of `VARIANTS`) into `folder`; return
    each party's table (id column 'id', the bank's label 'y'; no column settings: the
    harness adds `preprocess:`)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    drawn = raw_rows(rows, seed)
    out = {}
    for party, columns in drawn.columns.items():
        path = folder / f"{party}.csv"
        label = drawn.labels if party == "bank" else None
        _write(path, columns, label, drawn.empty[party], variant)
        out[party] = TableSource(path=str(path), id="id", label="y" if label is not None else None)
    return out


def _write(
    path: Path,
    columns: dict[str, Column],
    labels: np.ndarray | None,
    empty: np.ndarray,
    variant: str,
) -> None:
    cells: list[list[str]] = []
    names: list[str] = []
    for j, (name, col) in enumerate(columns.items()):
        if col.fmt == "word" and variant != "messy":
            continue
        names.append(name)
        if variant == "standardised":
            z = (col.values - col.values.mean()) / col.values.std()
            text = [f"{v:.6f}" for v in z]
        elif col.fmt == "word":
            text = list(col.values)
        else:
            text = [col.fmt % v for v in col.values]
        if variant == "messy":
            text = ["" if e else t for t, e in zip(text, empty[:, j], strict=True)]
        cells.append(text)
    header = ["id", *(["y"] if labels is not None else []), *names]
    lead = [[str(i) for i in range(len(empty))]]
    if labels is not None:
        lead.append([str(int(v)) for v in labels])
    lines = [",".join(header)] + [",".join(row) for row in zip(*lead, *cells, strict=True)]
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    """Calibration: the AUC of a logistic model on the ideal features of each party and of
    both (needs scikit-learn, not a dependency of the project)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 30_000
    drawn = raw_rows(rows)
    y, cut, ideal = drawn.labels, int(rows * 0.8), drawn.ideal
    print(f"{rows} rows, {y.mean():.1%} positive; logistic AUC on the ideal features of")
    for name, parts in (
        ("the bank", ("bank",)),
        ("the shop", ("shop",)),
        ("both, no words", ("bank", "shop", "cross")),
        ("both", ("bank", "shop", "cross", "words")),
    ):
        x = np.column_stack([ideal[p] for p in parts])
        x = (x - x.mean(0)) / (x.std(0) + 1e-12)
        model = LogisticRegression(max_iter=2000).fit(x[:cut], y[:cut])
        print(f"  {name:15} {roc_auc_score(y[cut:], model.predict_proba(x[cut:])[:, 1]):.4f}")


if __name__ == "__main__":
    main()
