"""`vfl predict`: score datasets with a stored model, as a federated job."""

from __future__ import annotations

import argparse
import sys

from vfl.cli.jobs import add_client_flags, client, follow
from vfl.contract.errors import SpecError
from vfl.specs import prediction_yaml


def _data(items: list[str] | None) -> dict[str, str]:
    """`--data PARTY=DATASET` flags as {party: dataset}.

    Raises:
        SpecError: an item that is not PARTY=DATASET.
    """
    data = {}
    for item in items or ():
        party, sep, dataset = item.partition("=")
        if not sep or not party or not dataset:
            raise SpecError(f"--data {item!r} is not PARTY=DATASET (e.g. --data bank=applicants)")
        data[party] = dataset
    return data


def command_yaml(args: argparse.Namespace) -> str:
    """The prediction spec of the command line (`vfl.specs.prediction_yaml`): `--spec
    FILE`, or the model, `--data` and `--out` flags (flags given with `--spec` override
    the file's).

    Raises:
        SpecError: a `--data` that is not PARTY=DATASET, no model, or an invalid spec.
    """
    return prediction_yaml(
        args.model,
        _data(args.data),
        out=args.out,
        batch_size=args.batch_size,
        base=args.spec,
    )


def cmd_predict(args: argparse.Namespace) -> int:
    text = command_yaml(args)
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
