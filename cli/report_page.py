"""What `vfl report` writes: a PNG per curve (matplotlib, Agg: no display needed) and one
self-contained HTML page with every image inlined (data: URIs, inline style, no script,
nothing fetched), the job's spec, parties, timings and result; for a binary task its
evaluation and, for a prediction, each party's stability (`cli.report_evaluation`)."""

from __future__ import annotations

import base64
import html
import io
import time
from collections.abc import Iterable
from pathlib import Path

from vfl.cli.report_evaluation import (
    EVALUATION_IMAGES,
    evaluation_charts,
    evaluation_html,
    stability_html,
)
from vfl.contract.curves import Curves, Series, curves
from vfl.contract.spec import JobSpec
from vfl.proto import coordinator_pb2 as pb
from vfl.results import JobView

PAGE = "report.html"


def write_report(report: pb.GetJobReportResponse, out: Path) -> list[Path]:
    """Write the PNGs and `report.html` of `report` into `out` (created if missing);
    returns the files written, the page last. A curve with no point yet is left out."""
    out.mkdir(parents=True, exist_ok=True)
    images = {name: png for name, png in charts(curves(report)) if png}
    if report.result.HasField("evaluation"):
        images.update(evaluation_charts(report.result.evaluation))
    written = []
    for name, png in images.items():
        (out / name).write_bytes(png)
        written.append(out / name)
    (out / PAGE).write_text(page(report, images), encoding="utf-8")
    return [*written, out / PAGE]


def charts(c: Curves) -> Iterable[tuple[str, bytes]]:
    """(file name, PNG) of every chart that has data."""
    yield "loss_by_round.png", _plot(c.loss, "round", "training loss", by_round=True)
    yield "loss_by_seconds.png", _plot(c.loss, "seconds", "training loss", by_round=False)
    yield "validation_by_round.png", _plot(c.validation, "round", "validation", by_round=True)
    yield (
        "validation_by_seconds.png",
        _plot(c.validation, "seconds", "validation", by_round=False),
    )
    yield "bytes_per_round.png", _plot(c.bytes_per_round, "round", "bytes sent per round", True)
    yield (
        "local_updates_per_round.png",
        _plot(c.local_updates_per_round, "round", "local updates per round", by_round=True),
    )


def _plot(series: list[Series], xlabel: str, title: str, by_round: bool) -> bytes:
    """One chart of `series` as PNG bytes; empty if no series has a point."""
    if not any(s.values for s in series):
        return b""
    from matplotlib.figure import Figure  # Agg canvas: no display, no pyplot state

    fig = Figure(figsize=(6.4, 3.6), dpi=100)
    ax = fig.subplots()
    for s in series:
        ax.plot(s.rounds if by_round else s.seconds, s.values, marker=".", label=s.label)
    ax.set_xlabel("round" if by_round else "seconds since submitted")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if len(series) > 1:
        ax.legend()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def page(report: pb.GetJobReportResponse, images: dict[str, bytes]) -> str:
    """The HTML page: header, result, timings, parties, curves, spec."""
    view = JobView.from_response(pb.GetJobResponse(job=report.job, result=report.result))
    spec = JobSpec.from_json(report.spec_json)
    r = report.result
    title = f"vfl job {view.job_id}"
    stability = {p: t.stability for p, t in r.parties.items() if t.HasField("stability")}
    curve_images = {k: v for k, v in images.items() if k not in EVALUATION_IMAGES}
    parts = [
        f"<h1>{_e(title)}</h1>",
        f"<p>state <b>{_e(view.state)}</b>"
        + (f": {_e(view.reason)}" if view.reason else "")
        + f"; protocol {_e(spec.protocol)}, local updates {_e(spec.local_updates.mode)}</p>",
        "<h2>Result</h2>",
        _table(["metric", "value"], [[k, f"{v:.6g}"] for k, v in sorted(r.metrics.items())])
        if r.metrics
        else "<p>no validation yet</p>",
        *(evaluation_html(r.evaluation, _table) if r.HasField("evaluation") else []),
        *(_figure(name, images[name]) for name in EVALUATION_IMAGES if name in images),
        *(stability_html(stability, _table) if stability else []),
        *_analysis(r),
        "<h2>Timings</h2>",
        _table(["", ""], _timings(view, r)),
        "<h2>Parties</h2>",
        _table(
            ["party", "role", "data", "bytes sent", "seconds", "local updates"],
            [
                [
                    p.id,
                    p.role,
                    p.data.dataset or "(a file)",
                    str(r.parties[p.id].bytes_sent) if p.id in r.parties else "-",
                    f"{r.parties[p.id].seconds:.2f}" if p.id in r.parties else "-",
                    str(r.parties[p.id].local_updates) if p.id in r.parties else "-",
                ]
                for p in spec.parties
            ],
        ),
        "<h2>Curves</h2>",
        *(_figure(name, png) for name, png in curve_images.items()),
        "" if curve_images else "<p>no curve yet: the job has reported no round</p>",
        "<h2>Spec</h2>",
        f"<pre>{_e(report.spec_yaml)}</pre>",
    ]
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>"
        + "\n".join(parts)
        + "</body></html>\n"
    )


def _figure(name: str, png: bytes) -> str:
    return (
        f'<figure><img alt="{_e(name)}" src="data:image/png;base64,'
        f'{base64.b64encode(png).decode()}"><figcaption>{_e(name)}</figcaption></figure>'
    )


def _analysis(r: pb.JobResult) -> list[str]:
    """An analysis job's columns: a table per party, strongest first, with each column's
    bins, counts and WOE (`vfl analyze`)."""
    if not r.HasField("analysis"):
        return []
    from vfl.analysis import Analysis
    from vfl.cli.analyze import bin_labels, strength

    analysis = Analysis.from_proto(r.analysis)
    parts = [f"<h2>WOE and IV</h2><p>{analysis.rows} rows, {analysis.events} events</p>"]
    for party in dict.fromkeys(c.party for c in analysis.columns):
        columns = sorted(analysis.party(party), key=lambda c: -(c.iv or 0.0))
        rows = []
        for c in columns:
            bins = "; ".join(
                f"{label}: {e}/{n} woe {w:.3f}"
                for label, e, n, w in zip(
                    bin_labels(c), c.events, c.non_events, c.woe, strict=False
                )
            )
            iv = "-" if c.iv is None else f"{c.iv:.4f}"
            kept = "" if c.selected is None else "yes" if c.selected else "no"
            rows.append([c.column, iv, strength(c.iv), kept, c.note, bins])
        head = ["column", "IV", "strength", "kept", "note", "bins: events/non-events, WOE"]
        parts += [f"<h3>{_e(party)}</h3>", _table(head, rows)]
    return parts


def _timings(view: JobView, r: pb.JobResult) -> list[list[str]]:
    rows = [["submitted", _when(view.created_at)], ["last update", _when(view.updated_at)]]
    if r.started_at:
        rows.append(["started", _when(r.started_at)])
    for label, value in (
        ("common rows (PSI)", r.intersection_size),
        ("PSI seconds", r.psi_seconds),
        ("rounds", r.rounds or r.round),
        ("local updates", r.local_updates),
        ("bytes sent (all parties)", r.bytes_sent),
        ("seconds (launch to end)", r.seconds),
    ):
        if value:
            rows.append([label, f"{value:.6g}" if isinstance(value, float) else str(value)])
    return rows


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


def _table(head: list[str], rows: list[list[str]]) -> str:
    th = "".join(f"<th>{_e(h)}</th>" for h in head) if any(head) else ""
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table>{f'<tr>{th}</tr>' if th else ''}{body}</table>"


def _e(text: object) -> str:
    return html.escape(str(text))


_STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}"
    "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2rem .6rem;"
    "text-align:left}pre{background:#f4f4f4;padding:1rem;overflow:auto}"
    "figure{display:inline-block;margin:.5rem}img{max-width:100%}"
)
