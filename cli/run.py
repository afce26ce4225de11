"""`vfl run`: a whole job on this machine, the coordinator and every party as local
processes (`vfl.local.run`). `vfl demo` is `vfl.cli.demo`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vfl.cli import progress
from vfl.cli.jobs import finish


def cmd_run(args: argparse.Namespace) -> int:
    from vfl.contract.spec import load_spec
    from vfl.local.run import run_local

    spec = load_spec(args.spec)
    party_args = ("--audit", str(Path(args.audit).resolve())) if args.audit else ()
    if args.insecure:
        print("warning: --insecure: the processes of this run talk without TLS", file=sys.stderr)
    try:
        view = run_local(
            spec,
            lambda c, j: progress.follow(c, j, show=not args.json),
            workdir=local_workdir(args),
            party_args=party_args,
            tls=not args.insecure,
        )
    except KeyboardInterrupt:
        print("interrupted: job cancelled, processes stopped", file=sys.stderr)
        return 130
    return finish(view, args.json)


def local_workdir(args: argparse.Namespace) -> str | None:
    """--workdir as an absolute path (a relative one is relative to this process's folder,
    not to the daemons', which run in it); None without it."""
    return str(Path(args.workdir).resolve()) if args.workdir else None


def add_parser(sub: argparse._SubParsersAction) -> None:
    for name, fn, helptext in (("run", cmd_run, "run a job on local processes"),):
        sp = sub.add_parser(name, help=helptext)
        sp.add_argument("spec", help="job.yaml (data may be given by path)")
        add_local_run_flags(sp, "the job store and the run's CA")
        sp.set_defaults(fn=fn)


def add_local_run_flags(sp: argparse.ArgumentParser, kept: str) -> None:
    """--json, --workdir, --audit and --insecure of a run on local processes (`vfl run`,
    `vfl demo`); `kept`: what --workdir keeps besides configs and logs."""
    sp.add_argument("--json", action="store_true", help="print the result as one JSON")
    sp.add_argument(
        "--workdir",
        help=f"keep configs, logs, {kept} here (without it, a temporary folder is removed "
        "when the run ends)",
    )
    sp.add_argument("--audit", metavar="DIR", help="log every data-plane envelope to DIR")
    sp.add_argument("--insecure", action="store_true", help="no TLS between the processes")
