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
