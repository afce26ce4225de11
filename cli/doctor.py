"""`vfl doctor`: check a federation end to end before a job (`vfl.Client.diagnose`).

Prints one line per check: `ok` lines, and for each problem a `FAIL` line naming the
party, the check and the fix. Exit code 0 when every check passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from vfl.cli.jobs import client, client_command


def cmd_doctor(args: argparse.Namespace) -> int:
    with client(args) as c:
        findings = c.diagnose(max_clock_skew=args.max_clock_skew, cert_days=args.cert_days)
        tls = c.tls
    failed = [f for f in findings if not f.ok]
    if args.json:
        print(json.dumps({"ok": not failed, "checks": [asdict(f) for f in findings]}))
        return 1 if failed else 0
    if tls is None:
        print("note: no --tls: certificates not checked (the federation runs without TLS?)")
    for f in findings:
        print(f.line())
    parties = sorted({f.subject for f in findings} - {"coordinator"})
    if failed:
        print(f"{len(failed)} problem{'s' if len(failed) > 1 else ''} found")
    else:
        print(
            f"federation ready: the coordinator and {len(parties)} parties ({', '.join(parties)})"
        )
    return 1 if failed else 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    def add(sp: argparse.ArgumentParser) -> None:
        sp.add_argument(
            "--max-clock-skew",
            type=float,
            default=5.0,
            metavar="S",
            help="clocks further apart than S seconds fail (default 5)",
        )
        sp.add_argument(
            "--cert-days",
            type=int,
            default=14,
            metavar="N",
            help="certificates expiring within N days fail (default 14)",
        )

    client_command(
        sub,
        "doctor",
        cmd_doctor,
        "check a federation before a job: health, data plane, certs, versions, clocks",
        __doc__.split("\n\n")[0],
        add=add,
        json="print the checks as one JSON",
    )
