"""`vfl predict`: score datasets with a stored model, as a federated job."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml
from vfl.cli.jobs import add_client_flags, client, follow
from vfl.contract.errors import SpecError
from vfl.contract.spec.predict import parse_predict_text


def prediction_yaml(args: argparse.Namespace) -> str:
    """The prediction spec of the command line: `--spec FILE`, or the model, `--data`
    and `--out` flags (flags given with `--spec` override the file's).

    Raises:
        SpecError: a `--data` that is not PARTY=DATASET, no model, or an invalid spec.
    """
    raw: dict = {}
    if args.spec:
        path = Path(args.spec)
        if not path.is_file():
            raise SpecError(f"prediction spec '{args.spec}' does not exist")
        raw = yaml.safe_load(path.read_text()) or {}
        if not isinstance(raw, dict):
            raise SpecError(f"prediction spec '{args.spec}' is not a YAML mapping")
    if args.model:
        raw["model"] = args.model
    for item in args.data or ():
        party, sep, dataset = item.partition("=")
        if not sep or not party or not dataset:
            raise SpecError(f"--data {item!r} is not PARTY=DATASET (e.g. --data bank=applicants)")
        raw.setdefault("data", {})[party] = dataset
    if args.out:
        raw["out"] = args.out
    if args.batch_size is not None:
        raw["batch_size"] = args.batch_size
    text = yaml.safe_dump(raw, sort_keys=False)
    parse_predict_text(text)  # fail here, with the field named, before dialling
    return text


def cmd_predict(args: argparse.Namespace) -> int:
    text = prediction_yaml(args)
    with client(args) as c:
        job_id = c.predict(text)
        if args.no_wait:
            print(job_id)
            return 0
        print(f"submitted {job_id}", file=sys.stderr)
        return follow(c, job_id, args.json)


def add_parser(sub: argparse._SubParsersAction) -> None:
    sp = sub.add_parser(
        "predict",
        help="score datasets with a stored model (scores land at the active party)",
        description="Score each party's dataset with a model the federation holds "
        "(`vfl models`); rows are aligned by PSI and only the active party gets the "
        "scores, as a CSV in its output folder.",
    )
    sp.add_argument("model", nargs="?", help="the model's id (its training job's id)")
    sp.add_argument(
        "--data",
        action="append",
        metavar="PARTY=DATASET",
        help="a party's dataset, from its own config (repeat for every party)",
    )
    sp.add_argument("--out", help="the CSV's name at the active party (default: the job id)")
    sp.add_argument("--spec", help="a prediction spec (YAML: model, data, out)")
    sp.add_argument("--batch-size", type=int, help="rows scored per exchange (default 2048)")
    sp.add_argument("--no-wait", action="store_true", help="print the job id and return")
    sp.add_argument("--json", action="store_true", help="print the result as JSON")
    add_client_flags(sp)
    sp.set_defaults(fn=cmd_predict)
