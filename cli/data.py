"""`vfl data synth-ctr`: a synthetic Criteo-like vertical split and a job spec for it."""

from __future__ import annotations

import argparse
from pathlib import Path

from vfl.cli.commands import actions


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


def add_parser(sub: argparse._SubParsersAction) -> None:
    data_sub = actions(sub, "data", help="data tools")
    sc = data_sub.add_parser("synth-ctr", help="write a synthetic Criteo-like vertical split")
    sc.add_argument("--rows", type=int, default=100_000)
    sc.add_argument("--out", required=True, help="output folder")
    sc.add_argument("--seed", type=int, default=0)
    sc.add_argument("--vocab", type=int, default=1000, help="values per categorical field")
    sc.set_defaults(fn=cmd_synth_ctr)
