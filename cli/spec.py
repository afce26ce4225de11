"""`vfl spec check | schema`: validate a job spec file, or print the JSON Schema of job
specs for editors (e.g. `# yaml-language-server: $schema=job.schema.json`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from vfl.cli.commands import actions
from vfl.contract.errors import SpecError


def cmd_check(args: argparse.Namespace) -> int:
    from vfl.contract.spec import load_spec

    try:
        spec = load_spec(args.spec)
    except SpecError as exc:
        raise SpecError(f"{args.spec}: {exc}") from None
    parties = len(spec.parties)
    print(f"{args.spec}: ok ({spec.job}, protocol {spec.protocol}, {parties} parties)")
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from vfl.contract.spec import job_schema

    text = json.dumps(job_schema(), indent=2) + "\n"
    if args.out:
        Path(args.out).write_text(text)
    else:
        print(text, end="")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    spec_sub = actions(sub, "spec", help="job spec tools")
    check = spec_sub.add_parser("check", help="validate a job spec file (exit 0 ok, 2 invalid)")
    check.add_argument("spec", help="job.yaml")
    check.set_defaults(fn=cmd_check)
    schema = spec_sub.add_parser("schema", help="print the JSON Schema of job specs")
    schema.add_argument("--out", metavar="FILE", help="write it to FILE instead")
    schema.set_defaults(fn=cmd_schema)
