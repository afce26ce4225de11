"""Kill -9 a party mid-job, many times: every run must end PAUSED, then SUCCEEDED after
`vfl resume`, with none of the killed daemon's processes left 10 s later.

    python -m bench.kill_resume                        50 runs, split and blindfl in turn
    python -m bench.kill_resume --runs 10 --json out.json

One federation (`vfl.local`'s: a coordinator and two party daemons with mutual TLS, as
`vfl run` starts them) on the credit shape (`--rows`, 13 + 10 features).
Each run submits a job (split, then blindfl with 512-bit test keys, in turn), waits until
it has checkpointed a random round of its first epochs, kills a random party daemon with
SIGKILL, and records: the state the coordinator gives the job (it must be PAUSED, with
the reason), the killed daemon's processes still alive 10 s later (must be none), then
starts the daemon again with the same config and state, runs `vfl resume` and waits for
the job's end (it must be SUCCEEDED). Prints one line a run and a summary table.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import yaml
from vfl.local.run import LocalProcesses, launched

from bench.credit_data import credit_job, credit_tables
from bench.jobs import on_datasets
from bench.procs import alive, killed, session_members

LEFTOVER_WAIT_S = 10.0
TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")


def wait(fed: LocalProcesses, job_id: str, done, timeout: float = 600.0):
    """Poll the job until `done(view)`; the last view (None on timeout)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        view = fed.client.get(job_id)
        if done(view):
            return view
        time.sleep(0.2)
    return None


def one_run(fed: LocalProcesses, tables, protocol: str, rng: random.Random) -> dict:
    spec = credit_job(protocol, tables, 512, epochs=6, validation={"fraction": 0.1})
    spec["job"] = f"kill-{protocol}"
    on_datasets(spec)  # as each party's config exposes its table
    spec["train"]["checkpoint_every"] = 5
    spec["network"] = {"bandwidth_mbps": 200, "rtt_ms": 40}  # >= 40 ms a round: time to kill
    job_id = fed.client.submit(yaml.safe_dump(spec))
    at_round = rng.randint(5, 80)
    view = wait(fed, job_id, lambda v: v.result.checkpoint_round >= at_round or v.state in TERMINAL)
    record = {"job": job_id, "protocol": protocol, "kill_after_round": at_round}
    if view is None or view.state in TERMINAL:
        record["outcome"] = f"ended before the kill: {None if view is None else view.state}"
        return record
    party = rng.choice(sorted(fed.topology.parties))
    daemon = fed.topology.parties[party]
    pid = daemon.pid
    members = killed(daemon)
    paused = wait(fed, job_id, lambda v: v.state in ("PAUSED", *TERMINAL), timeout=120.0)
    time.sleep(max(0.0, LEFTOVER_WAIT_S))
    left = sorted({p for p in members if alive(p)} | set(session_members(pid)))
    record.update(
        victim=party,
        processes=len(members),
        leftover=len(left),
        state_after_kill=None if paused is None else paused.state,
        reason=None if paused is None else paused.reason,
    )
    fed.topology.restart(party)
    if paused is None or paused.state != "PAUSED":
        record["outcome"] = "not paused"
        return record
    out = fed.vfl("resume", job_id)
    if out.returncode != 0:
        record["outcome"] = f"resume refused: {out.stderr.strip()[-300:]}"
        return record
    end = wait(fed, job_id, lambda v: v.state in TERMINAL)
    record["final"] = None if end is None else end.state
    record["outcome"] = "ok" if record["final"] == "SUCCEEDED" else f"ended {record['final']}"
    if end is not None and end.state != "SUCCEEDED":
        record["reason"] = end.reason
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.kill_resume", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--rows", type=int, default=5_000)
    parser.add_argument("--protocols", default="split,blindfl")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write every run to this file")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    protocols = args.protocols.split(",")
    records: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        tables = credit_tables(work, args.rows)
        datasets = {party: {"data": table} for party, table in tables.items()}
        with launched(datasets, work, coordinator_args=("--party-grace", "2.0")) as fed:
            for i in range(args.runs):
                record = one_run(fed, tables, protocols[i % len(protocols)], rng)
                records.append(record)
                print(json.dumps(record), flush=True)
                if args.json:
                    Path(args.json).write_text(json.dumps(records, indent=1))
    ok = sum(r["outcome"] == "ok" for r in records)
    paused = sum(r.get("state_after_kill") == "PAUSED" for r in records)
    leftover = sum(r.get("leftover", 0) for r in records)
    print("\n| runs | PAUSED after the kill | SUCCEEDED after resume | leftover processes |")
    print("|---|---|---|---|")
    print(f"| {len(records)} | {paused} | {ok} | {leftover} |")
    return 0 if ok == len(records) and leftover == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
