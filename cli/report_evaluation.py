"""The risk team's part of `vfl report`: the evaluation of a binary task (KS, Gini, AUC,
the lift and calibration tables, and their pictures: the gains curve, lift by band, the
calibration plot) and each party's population stability, as HTML pieces and PNGs."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable

from vfl.proto import coordinator_pb2 as pb

EVALUATION_IMAGES = ("gains.png", "lift_by_band.png", "calibration.png")
Table = Callable[[list[str], list[list[str]]], str]  # report_page._table


def evaluation_charts(e: pb.Evaluation) -> Iterable[tuple[str, bytes]]:
    """(file name, PNG) of the gains curve, the lift by band and the calibration plot."""
    from matplotlib.figure import Figure  # Agg canvas: no display, no pyplot state

    shares = [0.0]
    for b in e.lift:
        shares.append(shares[-1] + b.rows / e.rows)
    pictures: list[tuple[str, Callable[[object], None]]] = [
        ("gains.png", lambda ax: _gains(ax, e, shares)),
        ("lift_by_band.png", lambda ax: _lift(ax, e)),
        ("calibration.png", lambda ax: _calibration(ax, e)),
    ]
    for name, draw in pictures:
        fig = Figure(figsize=(4.8, 3.6), dpi=100)
        ax = fig.subplots()
        draw(ax)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        yield name, buf.getvalue()


def _gains(ax, e: pb.Evaluation, shares: list[float]) -> None:  # type: ignore[no-untyped-def]
    events = [0.0] + [b.cumulative_events_share for b in e.lift]
    ax.plot(shares, events, marker=".", label="model")
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", label="random")
    ax.set_xlabel("share of rows, highest scores first")
    ax.set_ylabel("share of events")
    ax.set_title(f"gains (KS {e.ks:.3f}, Gini {e.gini:.3f})")
    ax.legend()


def _lift(ax, e: pb.Evaluation) -> None:  # type: ignore[no-untyped-def]
    ax.bar([str(b.band) for b in e.lift], [b.lift for b in e.lift])
    ax.axhline(1.0, linestyle="--", color="grey")
    ax.set_xlabel("band (1: highest scores)")
    ax.set_ylabel("lift")
    ax.set_title("lift by band")


def _calibration(ax, e: pb.Evaluation) -> None:  # type: ignore[no-untyped-def]
    ax.plot(
        [c.mean_predicted for c in e.calibration],
        [c.event_rate for c in e.calibration],
        marker="o",
        label="bands",
    )
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", label="calibrated")
    ax.set_xlabel("mean predicted probability")
    ax.set_ylabel("observed event rate")
    ax.set_title("calibration")
    ax.legend()


def evaluation_html(e: pb.Evaluation, table: Table) -> list[str]:
    """The evaluation's figures and tables."""
    return [
        "<h2>Evaluation</h2>",
        table(
            ["rows", "events", "KS", "Gini", "AUC"],
            [[str(e.rows), str(e.events), f"{e.ks:.6g}", f"{e.gini:.6g}", f"{e.auc:.6g}"]],
        ),
        "<h3>Lift and gains (ten bands of equal rows, highest scores first)</h3>",
        table(
            ["band", "rows", "events", "event rate", "cumulative events", "lift", "scores"],
            [
                [
                    str(b.band),
                    str(b.rows),
                    str(b.events),
                    f"{b.event_rate:.4f}",
                    f"{b.cumulative_events_share:.4f}",
                    f"{b.lift:.3f}",
                    f"{b.min_score:.4g} .. {b.max_score:.4g}",
                ]
                for b in e.lift
            ],
        ),
        "<h3>Calibration</h3>",
        table(
            ["band", "rows", "mean predicted", "event rate"],
            [
                [str(c.band), str(c.rows), f"{c.mean_predicted:.4f}", f"{c.event_rate:.4f}"]
                for c in e.calibration
            ],
        ),
    ]


def stability_html(parties: dict[str, pb.Stability], table: Table) -> list[str]:
    """Each party's stability: its columns at watch and at shift, the columns its config
    shares, the scores' index."""
    rows = []
    for party, s in sorted(parties.items()):
        shared = ", ".join(f"{c.column} {c.index:.3f} ({c.level})" for c in s.shared)
        scores = f"{s.scores.index:.4f} ({s.scores.level})" if s.HasField("scores") else "-"
        rows.append([party, str(s.columns), str(s.watch), str(s.shift), scores, shared or "-"])
    return [
        "<h2>Population stability</h2>",
        "<p>index between the training rows and the rows scored: 0.1 and over is watch, "
        "0.25 and over a shift</p>",
        table(["party", "columns", "watch", "shift", "scores", "columns shared"], rows),
    ]
