"""What bench/soak.py saw: each job, the kills and restarts, the online scoring calls and
the daemons' memory (`Record`, thread-safe), and its summary as data and as a markdown
table.
"""

from __future__ import annotations

import threading
from argparse import Namespace
from collections import Counter
from dataclasses import asdict, dataclass, field

import numpy as np

TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")


@dataclass
class Job:
    """One submitted job as the soak saw it."""

    job_id: str
    kind: str  # split | blindfl | predict | over-limit
    submitted: float  # time.monotonic()
    state: str = ""
    reason: str = ""
    seconds: float = 0.0  # submitted to its end, as the soak saw it
    pauses: list[str] = field(default_factory=list)
    resumes: int = 0

    @property
    def lost(self) -> bool:
        """Not ended as it should: SUCCEEDED, or FAILED for an over-limit job."""
        return self.state != ("FAILED" if self.kind == "over-limit" else "SUCCEEDED")


class Record:
    """What the soak saw; thread-safe."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.jobs: dict[str, Job] = {}
        self.kills: list[dict] = []
        self.unplanned: list[dict] = []
        self.restarts = 0
        self.calls: Counter[str] = Counter()
        self.latencies: dict[str, list[float]] = {}
        self.peak_rss: dict[str, int] = {}

    def call(self, outcome: str, seconds: float) -> None:
        with self.lock:
            self.calls[outcome] += 1
            self.latencies.setdefault(outcome, []).append(seconds)

    def rss(self, name: str, value: int) -> None:
        with self.lock:
            self.peak_rss[name] = max(self.peak_rss.get(name, 0), value)


def summary(r: Record, args: Namespace, seconds: float, stopped_left: list[int]) -> dict:
    """Everything the soak saw, as plain data (what `--json` writes)."""
    with r.lock:
        jobs = [asdict(j) | {"lost": j.lost} for j in r.jobs.values()]
        calls, latencies = dict(r.calls), {k: list(v) for k, v in r.latencies.items()}
        kills, unplanned = list(r.kills), list(r.unplanned)
        restarts, peak = r.restarts, dict(r.peak_rss)
    total = sum(calls.values())
    answered = latencies.get("answered", [])
    everything = [s for v in latencies.values() for s in v]
    return {
        "settings": {k: v for k, v in vars(args).items() if k != "json"},
        "seconds": round(seconds, 1),
        "jobs": jobs,
        "jobs_submitted": len(jobs),
        "jobs_finished": sum(j["state"] == "SUCCEEDED" for j in jobs),
        "jobs_lost": sum(j["lost"] for j in jobs),
        "over_limit": [j for j in jobs if j["kind"] == "over-limit"],
        "daemon_restarts": restarts,
        "kills": kills,
        "leftover_processes": sum(len(k["leftover"]) for k in kills),
        "leftover_after_stop": stopped_left,
        "unplanned_deaths": unplanned,
        "peak_rss_mb": {k: round(v / 2**20) for k, v in sorted(peak.items())},
        "scoring": {
            "calls": total,
            "outcomes": calls,
            "answered_share": calls.get("answered", 0) / total if total else 0.0,
            "refused_share": calls.get("refused", 0) / total if total else 0.0,
            "p50_ms": _percentile(answered, 50),
            "p99_ms": _percentile(answered, 99),
            "p50_ms_all": _percentile(everything, 50),
            "p99_ms_all": _percentile(everything, 99),
        },
    }


def _percentile(seconds: list[float], q: float) -> float | None:
    return round(float(np.percentile(seconds, q)) * 1e3, 1) if seconds else None


def table(s: dict) -> str:
    """The soak's outcome as a markdown table."""
    kinds = Counter((j["kind"], j["state"]) for j in s["jobs"])
    by_kind = ", ".join(f"{k} {st}: {n}" for (k, st), n in sorted(kinds.items()))
    over = s["over_limit"]
    over_text = (
        "; ".join(
            f"{j['state']} after {j['seconds']} s"
            if j["state"] in TERMINAL
            else f"still {j['state'] or 'SUBMITTED'} at the end"
            for j in over
        )
        or "-"
    )
    sc = s["scoring"]
    others = {k: v for k, v in sc["outcomes"].items() if k not in ("answered", "refused")}
    rows = [
        ("minutes", f"{s['seconds'] / 60:.1f}"),
        ("jobs submitted", f"{s['jobs_submitted']} ({by_kind or '-'})"),
        ("jobs finished (SUCCEEDED)", s["jobs_finished"]),
        ("jobs lost (must be 0)", s["jobs_lost"]),
        ("over-limit jobs", f"{len(over)}: {over_text}"),
        ("kill -9 of a party daemon", len(s["kills"])),
        ("daemon restarts", s["daemon_restarts"]),
        ("unplanned daemon deaths", len(s["unplanned_deaths"])),
        (
            "leftover processes 10 s after a kill (must be 0)",
            f"{s['leftover_processes']} (per kill: "
            + (", ".join(str(len(k["leftover"])) for k in s["kills"]) or "-")
            + ")",
        ),
        ("processes left 10 s after stopping the daemons", len(s["leftover_after_stop"])),
        ("peak RSS, MB", ", ".join(f"{k} {v:,}" for k, v in s["peak_rss_mb"].items())),
        ("scoring calls", f"{sc['calls']:,}"),
        ("answered / refused", f"{sc['answered_share']:.1%} / {sc['refused_share']:.1%}"),
        ("other outcomes", ", ".join(f"{k} {v:,}" for k, v in sorted(others.items())) or "-"),
        ("scoring p50 / p99, answered, ms", f"{sc['p50_ms']} / {sc['p99_ms']}"),
        ("scoring p50 / p99, every call, ms", f"{sc['p50_ms_all']} / {sc['p99_ms_all']}"),
    ]
    return "\n".join(["| measure | value |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows)])
