"""`vfl run | demo`: a whole job on this machine, the coordinator and every party as local
processes (`coordinator.local`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from coordinator.cli import progress
from coordinator.cli.jobs import finish

DEMO_SPEC = Path(__file__).parent / "data" / "demo.yaml"


def cmd_run(args: argparse.Namespace, spec_path: Path | None = None) -> int:
    from coordinator.local import run_local
    from coordinator.spec import load_spec

    spec = load_spec(spec_path or args.spec)
    party_args = ("--audit", str(Path(args.audit).resolve())) if args.audit else ()
    if args.insecure:
        print("warning: --insecure: the processes of this run talk without TLS", file=sys.stderr)
    try:
        view = run_local(
            spec,
            lambda c, j: progress.follow(c, j, show=not args.json),
            workdir=args.workdir,
            party_args=party_args,
            tls=not args.insecure,
        )
    except KeyboardInterrupt:
        print("interrupted: job cancelled, processes stopped", file=sys.stderr)
        return 130
    return finish(view, args.json)


def cmd_demo(args: argparse.Namespace) -> int:
    return cmd_run(args, DEMO_SPEC)


def add_parser(sub: argparse._SubParsersAction) -> None:
    for name, fn, helptext in (
        ("run", cmd_run, "run a job on local processes"),
        ("demo", cmd_demo, "run the bundled two-party demo"),
    ):
        sp = sub.add_parser(name, help=helptext)
        if name == "run":
            sp.add_argument("spec", help="job.yaml (data may be given by path)")
        sp.add_argument("--json", action="store_true", help="print the result as one JSON")
        sp.add_argument(
            "--workdir",
            help="keep configs, logs, the job store and the run's CA here (without it, a "
            "temporary folder is removed when the run ends)",
        )
        sp.add_argument("--audit", metavar="DIR", help="log every data-plane envelope to DIR")
        sp.add_argument("--insecure", action="store_true", help="no TLS between the processes")
        sp.set_defaults(fn=fn)
