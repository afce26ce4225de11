"""Following a job: a live progress bar (round, loss, validation metric) and the result."""

from __future__ import annotations

import sys

from tqdm import tqdm

from coordinator.client import CoordinatorClient, JobView


def _postfix(result: dict) -> dict[str, str]:
    post = {}
    if result.get("loss") is not None:
        post["loss"] = f"{result['loss']:.4f}"
    metrics = result.get("metrics") or {}
    for key in ("auc", "accuracy", "r2"):
        if key in metrics:
            post[f"val_{key}"] = f"{metrics[key]:.4f}"
            break
    return post


def follow(client: CoordinatorClient, job_id: str, show: bool = True) -> JobView:
    """Watch `job_id` until it ends; draw a progress bar on stderr when `show`."""
    bar = None
    last: JobView | None = None
    try:
        for view in client.watch(job_id):
            last = view
            if not show:
                continue
            total = view.result.get("total_rounds")
            if bar is None and total:
                bar = tqdm(
                    total=total, desc=f"{job_id}", unit="round", file=sys.stderr, dynamic_ncols=True
                )
            if bar is not None:
                bar.n = int(view.result.get("round") or 0)
                bar.set_postfix(_postfix(view.result), refresh=False)
                bar.set_description_str(f"{job_id} {view.state.lower()}", refresh=False)
                bar.refresh()
    finally:
        if bar is not None:
            bar.close()
    if last is None:
        last = client.get(job_id)
    return last


def format_result(view: JobView) -> str:
    r = view.result
    lines = [f"job {view.job_id}: {view.state}"]
    if view.reason:
        lines.append(f"  reason: {view.reason}")
    if r.get("metrics"):
        lines.append(
            "  validation: "
            + ", ".join(f"{k}={v:.4f}" for k, v in r["metrics"].items() if isinstance(v, float))
        )
    for key in (
        "intersection_size",
        "psi_seconds",
        "rounds",
        "local_updates",
        "bytes_sent",
        "seconds",
    ):
        if key in r:
            lines.append(f"  {key}: {r[key]}")
    return "\n".join(lines)
