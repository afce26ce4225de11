"""`vfl attack job.yaml`: run the job as `vfl run` does (every party local, the wire
audit on, each party recording its own view), run it again on permuted labels (the
distinguisher's second transcript), then run the attacks of `vfl.attack` on the recorded
views and print what leaked. The job runs unchanged: the same daemons, code and audit as
production; only `--record-views` and `--audit` are added to the party daemons."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from vfl.cli import progress

if TYPE_CHECKING:
    from vfl.attack import AttackReport


def _run_recorded(spec, folder: Path, show: bool, tls: bool):
    """Run `spec` on local processes in `folder` with the audit and every view recorded;
    returns (job view, {party: view folder}, audit folder)."""
    from vfl.local.run import run_local

    audit = folder / "audit"
    view = run_local(
        spec,
        lambda c, j: progress.follow(c, j, show=show),
        workdir=str(folder),
        party_args=("--audit", str(audit), "--record-views"),
        tls=tls,
    )
    views = {p.id: folder / f"{p.id}-state" / "views" / view.job_id for p in spec.parties}
    return view, views, audit


def _load(spec, views: dict[str, Path], audit: Path):
    from vfl.attack import load_view

    return {p.id: load_view(p.id, p.role, views[p.id], audit) for p in spec.parties}


def _permuted_spec(spec, folder: Path):
    from vfl.attack.data import permuted_labels

    active = spec.active
    table = permuted_labels(active.data.table(), folder, spec.train.seed)
    return spec.with_data(active.id, active.data.model_copy(update={"path": table.path}))


class RunFailed(Exception):
    """One of `vfl attack`'s jobs did not succeed (the message says which and why)."""


def _recorded(spec, folder: Path, show: bool, tls: bool, what: str):
    """`_run_recorded` of `spec`, its views loaded, with its job view and seconds.

    Raises:
        RunFailed: the job did not succeed.
    """
    began = time.monotonic()
    job, views, audit = _run_recorded(spec, folder, show, tls)
    seconds = time.monotonic() - began
    if job.state != "SUCCEEDED":
        raise RunFailed(f"{what} {job.job_id} {job.state}: {job.reason}")
    return job, _load(spec, views, audit), seconds


def _attack(spec, base: Path, args: argparse.Namespace) -> tuple[AttackReport, dict[str, float]]:
    """Both runs and the attacks: the report and the seconds each part took."""
    from vfl.attack import AttackReport, evaluate
    from vfl.attack.kinds import COMPARED

    show, tls = not args.json, not args.insecure
    job, views, job_s = _recorded(spec, base / "job", show, tls, "job")
    permuted, twin_s = None, 0.0
    if not args.no_distinguisher and spec.model.kind in COMPARED:
        twin = _permuted_spec(spec, base / "permuted-data")
        _, permuted, twin_s = _recorded(
            twin, base / "permuted", show, tls, "the permuted-label job"
        )
    began = time.monotonic()
    rows = evaluate(views, spec.protocol, permuted, spec.train.seed, kind=spec.model.kind)
    metrics = {k: float(v) for k, v in job.to_plain().get("metrics", {}).items()}
    report = AttackReport(spec.job, spec.protocol, job.state, rows, metrics)
    seconds = {"job": job_s, "permuted": twin_s, "attacks": time.monotonic() - began}
    return report, seconds


def cmd_attack(args: argparse.Namespace) -> int:
    from vfl.attack import AttackError
    from vfl.attack.report import table, write_report
    from vfl.contract.spec import load_spec

    spec = load_spec(args.spec)
    if spec.model.task != "binary":
        where = "model.top.task" if spec.model.kind == "network" else "model.trees.task"
        print(f"error: vfl attack scores binary tasks ({where}: binary)", file=sys.stderr)
        return 2
    temporary = not args.workdir
    base = Path(tempfile.mkdtemp(prefix="vfl-attack-")) if temporary else Path(args.workdir)
    try:
        report, seconds = _attack(spec, base.resolve(), args)
    except RunFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except AttackError as exc:  # a view that cannot be attacked as asked
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: job cancelled, processes stopped", file=sys.stderr)
        return 130
    finally:
        if temporary:
            shutil.rmtree(base, ignore_errors=True)
    if args.out:
        write_report(report, Path(args.out))
    print(json.dumps(report.to_json()) if args.json else table(report))
    print(
        f"seconds: job {seconds['job']:.1f}, permuted-label job {seconds['permuted']:.1f}, "
        f"attacks {seconds['attacks']:.1f}",
        file=sys.stderr,
    )
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    sp = sub.add_parser(
        "attack",
        help="run a job locally, then published attacks on what each party received",
    )
    sp.add_argument("spec", help="job.yaml (data by path; a binary task)")
    sp.add_argument("--json", action="store_true", help="print the result as one JSON")
    sp.add_argument("--out", metavar="DIR", help="write report.md, its plots and attacks.json")
    sp.add_argument(
        "--workdir",
        help="keep both runs' configs, logs, views and audits here (without it, a temporary "
        "folder is removed when the command ends)",
    )
    sp.add_argument(
        "--no-distinguisher",
        action="store_true",
        help="skip the second run on permuted labels (and the distinguisher); tree jobs "
        "never run it",
    )
    sp.add_argument("--insecure", action="store_true", help="no TLS between the processes")
    sp.set_defaults(fn=cmd_attack)
