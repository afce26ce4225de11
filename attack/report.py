"""`vfl attack`'s output: the table, and with `--out DIR` a Markdown report with the
plots that matter (score histograms by true label, R² per feature) beside
`attacks.json`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from vfl.attack.harness import AttackReport, AttackRow

COLUMNS = ("attack", "attacker", "score", "baseline", "chance band", "verdict", "used")


def _cells(row: AttackRow) -> list[str]:
    base = "" if row.baseline is None else f"{row.baseline:.3f}"
    band = f"{row.chance_low:.3f}-{row.chance_high:.3f}"
    return [row.attack, row.attacker, f"{row.score:.3f}", base, band, row.verdict, row.used]


def table(report: AttackReport) -> str:
    """The rows as an aligned text table, under a line naming the job."""
    rows = [list(COLUMNS), *(_cells(r) for r in report.rows)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS) - 1)]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1]
        for r in rows
    ]
    head = f"job {report.job} ({report.protocol}): {report.state}"
    if report.metrics:
        head += ", validation " + ", ".join(f"{k} {v:.4f}" for k, v in report.metrics.items())
    return "\n".join([head, *lines])


def write_report(report: AttackReport, folder: Path) -> Path:
    """attacks.json, report.md and one PNG per plotted row in `folder`; returns report.md."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "attacks.json").write_text(json.dumps(report.to_json(), indent=2) + "\n")
    lines = [
        f"# What leaked: job {report.job} ({report.protocol})",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    lines += ["| " + " | ".join(_cells(r)) + " |" for r in report.rows]
    lines.append("")
    for i, row in enumerate(report.rows):
        image = _plot(row, folder / f"attack-{i:02d}.png")
        if image is not None:
            lines += [
                f"## {row.attack}: {row.attacker}",
                "",
                row.used,
                "",
                f"![]({image.name})",
                "",
            ]
    path = folder / "report.md"
    path.write_text("\n".join(lines))
    return path


def _plot(row: AttackRow, path: Path) -> Path | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.2))
    try:
        if "scores" in row.plot:
            scores, labels = np.asarray(row.plot["scores"]), np.asarray(row.plot["labels"])
            finite = np.isfinite(scores)
            bins = list(np.histogram_bin_edges(scores[finite], bins=50))
            for value, name in ((0, "negative"), (1, "positive")):
                if row.attack == "distinguisher":
                    name = "true-label run" if value else "permuted run"
                chosen = scores[finite & (labels == value)]
                ax.hist(chosen, bins=bins, alpha=0.55, density=True, label=name)
            ax.set_xlabel(f"{row.attack} score (AUC {row.score:.3f})")
        elif "r2" in row.plot:
            r2, base = np.asarray(row.plot["r2"]), np.asarray(row.plot["baseline_r2"])
            x = np.arange(len(r2))
            ax.bar(x - 0.2, r2, 0.4, label="from what B saw + X_B")
            ax.bar(x + 0.2, base, 0.4, label="from X_B alone")
            ax.set_xlabel("passive feature")
            ax.set_ylabel("R²")
        else:
            return None
        ax.legend()
        ax.set_title(f"{row.attack}, {row.attacker}: {row.verdict}")
        fig.tight_layout()
        fig.savefig(path, dpi=90)
        return path
    finally:
        plt.close(fig)
