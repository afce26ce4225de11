"""`vfl doctor`: check a federation end to end before a job (`coordinator.doctor`).

Prints one line per check: `ok` lines, and for each problem a `FAIL` line naming the
party, the check and the fix. Exit code 0 when every check passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from vfl.cli import certs
from vfl.cli.jobs import add_client_flags
from vfl.coordinator.doctor import Limits, diagnose


def cmd_doctor(args: argparse.Namespace) -> int:
    tls = certs.client_tls(args)
    findings = diagnose(args.coordinator, tls, Limits(args.max_clock_skew, args.cert_days))
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
    sp = sub.add_parser(
        "doctor",
        help="check a federation before a job: health, data plane, certs, versions, clocks",
        description=__doc__.split("\n\n")[0],
    )
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
    sp.add_argument("--json", action="store_true", help="print the checks as one JSON")
    add_client_flags(sp)
    sp.set_defaults(fn=cmd_doctor)
