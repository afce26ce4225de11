"""`vfl score`: score rows by id with a stored model, online, at the model's active party.

The active party is found with `--party HOST:PORT`, else by asking the coordinator
(`LocateModel`: the model's active party and the address it registered). One line per
id: its score columns, or the error that kept it from being scored (an id's characters
that do not print are shown escaped: `shown`). Exit code 0 when every id was scored, 1
when some id was not (the others are still printed), 3 when the party did not answer or
refused the request at its capacity (`ScoringBusy`: the message says when to retry).
"""

from __future__ import annotations

import argparse
import json

from vfl.cli.commands import seconds
from vfl.cli.jobs import client, client_command
from vfl.scoring import Scores


def score(args: argparse.Namespace) -> Scores:
    """The scores of the command line's ids (`Client.score`).

    Raises:
        PartyUnavailable: the active party is unreachable (names the cause and fix).
        CoordinatorError: the coordinator or the party refused (unknown model, ...).
    """
    with client(args) as c:
        return c.score(
            args.model, args.id, party=args.party, expect=args.expect, timeout=args.timeout
        )


def shown(text: str) -> str:
    """`text` for one line of a terminal: a tab, a line break, an escape sequence or any
    other character that does not print becomes its Python escape (`\\t`, `\\n`,
    `\\x1b`), so that an id can neither break the columns nor drive the terminal."""
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text
    )


def cmd_score(args: argparse.Namespace) -> int:
    scores = score(args)
    if args.json:
        print(json.dumps(scores.to_plain()))
    else:
        for item in scores:
            if item.error is not None:
                print(f"{shown(item.id)}\terror {item.error}: {shown(item.message)}")
            else:
                cells = [f"{k}={v:.6g}" for k, v in item.values.items()]
                cells += [f"class={shown(item.predicted_class)}"] if item.predicted_class else []
                print("\t".join([shown(item.id), *cells]))
    return 0 if scores.ok else 1


def add_parser(sub: argparse._SubParsersAction) -> None:
    def add(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("model", help="the model's id (its training job's id)")
        sp.add_argument(
            "--id", action="append", required=True, help="a row id to score (repeat for more)"
        )
        sp.add_argument("--party", metavar="HOST:PORT", help="the active party's daemon")
        sp.add_argument("--expect", help="with --party and TLS: the party id its certificate names")
        sp.add_argument("--timeout", type=seconds, default=60.0, help="seconds (default 60)")

    client_command(
        sub,
        "score",
        cmd_score,
        "score rows by id with a stored model, online (at its active party)",
        "Score rows by id with a model the federation holds: the model's active party looks "
        "its rows up by id and runs the secure forward with every passive party. Exit code "
        "1 if some id was not scored.",
        add=add,
        json="print the scores as JSON",
    )
