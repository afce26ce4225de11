"""`vfl report JOB [--out DIR]`: a job's curves as PNGs and one self-contained HTML page,
from the coordinator (`GetJobReport`); works while the job runs, too."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vfl.cli.jobs import client, client_command


def cmd_report(args: argparse.Namespace) -> int:
    from vfl.cli.report_page import write_report

    with client(args) as c:
        report = c.job_report(args.job)
    out = Path(args.out or f"{args.job}-report")
    written = write_report(report, out)
    for path in written[:-1]:
        print(f"wrote {path}", file=sys.stderr)
    print(written[-1])
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    def add(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("job", help="the job's id")
        sp.add_argument("--out", metavar="DIR", help="where to write (default: JOB-report)")

    client_command(
        sub, "report", cmd_report, "a job's curves: PNGs and one HTML page", add=add, json=None
    )
