"""`vfl predict`: score datasets with a stored model, as a federated job."""

from __future__ import annotations

import argparse
import sys

from vfl.cli.jobs import client, client_command, follow
from vfl.errors import SpecError


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


def cmd_predict(args: argparse.Namespace) -> int:
    data = _data(args.data)
    with client(args) as c:
        job_id = c.submit_prediction(
            args.model, data, out=args.out, batch_size=args.batch_size, spec=args.spec
        )
        if args.no_wait:
            print(job_id)
            return 0
        print(f"submitted {job_id}", file=sys.stderr)
        return follow(c, job_id, args.json)


def add_parser(sub: argparse._SubParsersAction) -> None:
    def add(sp: argparse.ArgumentParser) -> None:
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

    client_command(
        sub,
        "predict",
        cmd_predict,
        "score datasets with a stored model (scores land at the active party)",
        "Score each party's dataset with a model the federation holds (`vfl models`); "
        "rows are aligned by PSI and only the active party gets the scores, as a CSV in "
        "its output folder; flags given with `--spec` override the file's.",
        add=add,
    )
