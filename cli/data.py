"""`vfl data`: `synth-ctr` (a synthetic Criteo-like vertical split and a job spec for it)
and `describe` (a party's own summary of one of its datasets, sent nowhere)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from vfl.cli.commands import actions

if TYPE_CHECKING:
    from vfl.party.tables.describe import SparseSummary


def cmd_synth_ctr(args: argparse.Namespace) -> int:
    from vfl.celu.synth_ctr import CATEGORICAL_FIELDS, write_csv

    out = Path(args.out)
    meta = write_csv(out, args.rows, args.seed, vocab=args.vocab)
    job = {
        "job": "synth-ctr",
        "parties": [
            {
                "id": "advertiser",
                "role": "active",
                "data": {"path": "active.csv", "id": "id", "label": "y"},
            },
            {
                "id": "publisher",
                "role": "passive",
                "data": {
                    "path": "passive.csv",
                    "id": "id",
                    "categorical": list(CATEGORICAL_FIELDS),
                },
            },
        ],
        "model": {
            "source": {"out_dim": 32, "hidden": [64], "embedding_dim": 8},
            "top": {"hidden": [32], "task": "binary"},
        },
        "local_updates": {"mode": "celu", "workset": 5, "reuse": 5, "xi": 0.5},
        "train": {"epochs": 1, "batch_size": 256, "lr": 0.05, "optimizer": "adagrad"},
        "validation": {"fraction": 0.1, "every": 20},
    }
    import yaml

    (out / "job.yaml").write_text(yaml.safe_dump(job, sort_keys=False))
    print(
        f"wrote {meta['rows']} rows (positive rate {meta['positive_rate']:.3f}) to {out}; "
        f"train with: vfl run {out / 'job.yaml'}"
    )
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    """Print per column of a dataset in the party's config: type, missing share, distinct
    values, min / median / max (a LIBSVM dataset as a whole: rows, features, nonzeros a
    row, the range of its values, its label values). Reads the file here (a sql dataset:
    runs its query on its database); starts no daemon, opens no listening socket.

    Raises:
        ConfigError: the config is invalid or has no such dataset (lists its datasets).
        DataError: the dataset's file is missing or unreadable, or its database fails.
    """
    from vfl.party.config import load_party_config
    from vfl.party.errors import ConfigError
    from vfl.party.tables.describe import describe_dataset, describe_libsvm

    config = load_party_config(args.config)
    source = config.datasets.get(args.dataset)
    if source is None:
        known = ", ".join(sorted(config.datasets)) or "none"
        raise ConfigError(
            f"party config '{args.config}' has no dataset '{args.dataset}'; its datasets: {known}"
        )
    if source.format == "libsvm":
        return _describe_sparse(describe_libsvm(source, args.dataset), args, source.path)
    rows, columns = describe_dataset(source, args.dataset)
    if args.json:
        out = {"dataset": args.dataset, "rows": rows, "columns": [c.as_dict() for c in columns]}
        print(json.dumps(out, indent=2))
        return 0
    where = source.path if source.format != "sql" else f"the query at {source.url}"
    print(f"dataset '{args.dataset}': {rows} rows, {len(columns)} columns ({where})")
    width = max([6, *(len(c.name) for c in columns)])
    print(f"{'column':<{width}}  {'type':<11}  {'missing':>7}  {'distinct':>8}  min / median / max")
    for c in columns:
        stats = " / ".join(f"{v:.6g}" for v in (c.min, c.median, c.max) if v is not None)
        print(f"{c.name:<{width}}  {c.type:<11}  {c.missing:>7.1%}  {c.distinct:>8}  {stats}")
    return 0


def _describe_sparse(summary: SparseSummary, args: argparse.Namespace, path: str) -> int:
    """Print a LIBSVM dataset's summary (`party.tables.describe.SparseSummary`)."""
    if args.json:
        print(json.dumps({"dataset": args.dataset, **summary.as_dict()}, indent=2))
        return 0
    s = summary
    span = f" (indices {s.first_index} to {s.last_index})" if s.features else ""
    print(f"dataset '{args.dataset}': {s.rows} rows, LIBSVM, {s.features} features{span} ({path})")
    low, median, high = s.per_row
    print(f"nonzeros a row: {low} / {median:g} / {high} (min / median / max; {s.nonzeros} in all)")
    if s.value_min is not None and s.value_max is not None:
        print(f"values: {s.value_min:g} to {s.value_max:g}")
    if s.labels is not None:
        shown = (f"{v} ({n} row{'s' if n != 1 else ''})" for v, n in s.labels.items())
        print(f"labels: {', '.join(shown)}")
    elif s.label_distinct:
        print(f"labels: {s.label_distinct} distinct, {s.label_min:g} to {s.label_max:g}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    data_sub = actions(sub, "data", help="data tools")
    sc = data_sub.add_parser("synth-ctr", help="write a synthetic Criteo-like vertical split")
    sc.add_argument("--rows", type=int, default=100_000)
    sc.add_argument("--out", required=True, help="output folder")
    sc.add_argument("--seed", type=int, default=0)
    sc.add_argument("--vocab", type=int, default=1000, help="values per categorical field")
    sc.set_defaults(fn=cmd_synth_ctr)
    de = data_sub.add_parser(
        "describe",
        help="per column of a dataset: type, missing share, distinct values, min/median/max "
        "(run at the party; sends nothing)",
    )
    de.add_argument("--config", required=True, help="the party config (vfl party serve's)")
    de.add_argument("dataset", help="a dataset the config lists")
    de.add_argument("--json", action="store_true", help="print one JSON object")
    de.set_defaults(fn=cmd_describe)
