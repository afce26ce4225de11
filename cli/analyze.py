"""`vfl analyze job.yaml`: every party's columns binned and measured against the label
(WOE per bin, IV per column), with PSI first and nothing trained. On local processes as
`vfl run` does (a spec with paths), or through a running coordinator with
`--coordinator` as `vfl submit` does (a spec with datasets).

A table per party: each column's IV and how a scorecard reads it (`strength`), its bins,
whether `features.select` keeps it, and a note where it cannot inform; `--bins` adds
each bin's bounds, counts and WOE; `--json` prints one object (`vfl.analysis.Analysis`,
with the job's id and state).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from vfl.analysis import Analysis, ColumnIV
from vfl.cli import certs, progress
from vfl.cli.run import add_local_run_flags, local_workdir
from vfl.results import JobView

# the usual reading of an IV in credit scoring (Siddiqi)
STRENGTH = ((0.02, "useless"), (0.1, "weak"), (0.3, "medium"), (0.5, "strong"))


def strength(iv: float | None) -> str:
    if iv is None:
        return "-"
    return next((name for bound, name in STRENGTH if iv < bound), "suspicious")


def cmd_analyze(args: argparse.Namespace) -> int:
    from vfl.contract.spec import load_spec

    spec = load_spec(args.spec).model_copy(update={"analyze": True})
    show = not args.json
    if args.coordinator:
        from vfl.client import Client

        with Client(args.coordinator, certs.client_tls(args)) as c:
            job_id = c.submit_analysis(spec)
            if show:
                print(f"submitted {job_id}", file=sys.stderr)
            view = progress.follow(c, job_id, show=show)
    else:
        from vfl.local.run import run_local

        party_args = ("--audit", str(Path(args.audit).resolve())) if args.audit else ()
        view = run_local(
            spec,
            lambda c, j: progress.follow(c, j, show=show),
            workdir=local_workdir(args),
            party_args=party_args,
            tls=not args.insecure,
        )
    return finish(view, args.json, args.bins)


def finish(view: JobView, as_json: bool, bins: bool) -> int:
    result = view.result
    analysis = Analysis.from_proto(result.analysis) if result.HasField("analysis") else None
    if as_json:
        plain = analysis.to_plain() if analysis is not None else {"columns": []}
        plain = {"job": view.job_id, "state": view.state, "reason": view.reason, **plain}
        plain["seconds"] = result.seconds
        print(json.dumps(plain))
    else:
        print(progress.format_result(view, bins))
    if view.state == "FAILED" and result.refused:
        return 2
    return 0 if view.state == "SUCCEEDED" else 1


def format_analysis(analysis: Analysis, bins: bool = False) -> str:
    """A table per party, strongest column first; with `bins`, each column's bins."""
    lines = [f"  rows analysed: {analysis.rows} ({analysis.events} events)"]
    parties = list(dict.fromkeys(c.party for c in analysis.columns))
    for party in parties:
        columns = sorted(analysis.party(party), key=lambda c: -(c.iv or 0.0))
        lines.append(f"party {party}: {len(columns)} column(s)")
        lines.append(f"  {'column':<24} {'IV':>8}  {'strength':<10} {'bins':>4}  {'kept':<4}  note")
        for c in columns:
            iv = "-" if c.iv is None else f"{c.iv:.4f}"
            kept = "" if c.selected is None else "yes" if c.selected else "no"
            nbins = len(c.events) or "-"
            lines.append(
                f"  {c.column:<24} {iv:>8}  {strength(c.iv):<10} {nbins:>4}  {kept:<4}  {c.note}"
            )
            if bins and c.events:
                lines += [f"      {row}" for row in _bin_rows(c)]
    return "\n".join(lines)


def _bin_rows(c: ColumnIV) -> list[str]:
    labels = bin_labels(c)
    rows = [f"{'bin':<28} {'events':>8} {'non-events':>10} {'WOE':>8}"]
    for label, e, n, w in zip(labels, c.events, c.non_events, c.woe, strict=False):
        rows.append(f"{label:<28} {e:>8} {n:>10} {w:>8.4f}")
    return rows


def bin_labels(c: ColumnIV) -> list[str]:
    """Each bin's label: its interval, its word, or '#i' where the bins are not known."""
    count = len(c.events)
    if c.edges is not None:
        bounds = ["-inf", *(f"{e:.6g}" for e in c.edges), "+inf"]
        labels = [f"({lo}, {hi}]" for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]
        labels[-1] = labels[-1].replace("+inf]", "+inf)")
    elif c.categories is not None:
        labels = [repr(w) for w in c.categories] + ["(other words)"]
    else:
        labels = [f"#{i}" for i in range(count - int(c.empty))]
    if c.empty:
        labels.append("(empty)")
    return labels


def add_parser(sub: argparse._SubParsersAction) -> None:
    sp = sub.add_parser(
        "analyze",
        help="WOE and IV of every party's columns (PSI first, nothing trained)",
        description=__doc__.split("\n\n")[0],
    )
    sp.add_argument(
        "spec", help="job.yaml (data by path: local processes; by dataset: --coordinator)"
    )
    sp.add_argument("--bins", action="store_true", help="print every column's bins too")
    sp.add_argument(
        "--coordinator",
        help="submit to this running coordinator (host:port) instead of local processes",
    )
    add_local_run_flags(sp, "the job store and the run's CA")
    certs.add_tls_flags(sp, client=True)
    sp.set_defaults(fn=cmd_analyze)
