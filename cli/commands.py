"""Helpers for the commands' parsers (`vfl.cli.main.build_parser`)."""

from __future__ import annotations

import argparse


def actions(sub: argparse._SubParsersAction, name: str, help: str) -> argparse._SubParsersAction:
    """Command `name` under `sub` whose first argument is one of its actions (`vfl certs
    init`, `vfl spec check`; required, as `args.action`); returns where to add them.

    Args:
        sub: the parent's subcommands.
        name: the command.
        help: its line in the parent's help.
    """
    return sub.add_parser(name, help=help).add_subparsers(dest="action", required=True)


def seconds(text: str) -> float:
    """An option's positive, finite number of seconds (`type=seconds`): anything else is
    a usage error (exit 2) naming the value."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value
