"""Online scoring under overload: a burst of concurrent Predict calls while a training job
runs on the same daemons.

    python -m bench.overload                      200 and 1,000 calls, split and blindfl
    python -m bench.overload --calls 200 --protocol split
    python -m bench.overload --out bench/results/overload.txt

A coordinator and two party daemons (bank: active, shop: passive; the breast data) run as
`vfl ... serve` processes on this machine, as tests/support/processes.py starts them, the
bank with the default `scoring:` (a call admitted if it can be scored within 1 s; 1,024
calls held at once). Per protocol a model is
trained (blindfl with 1024-bit INSECURE test keys by default), scored in batch (`vfl
predict`) and loaded for online scoring by one call; then, for each burst size N, a split
training job starts (10 epochs over an emulated 40 ms link, so that it trains through the
burst), and once it trains, one client process starts N Predict calls of one id each at
once, on one channel (tests/support/scoring_load.py). Reported per burst: the share
scored and the share refused (RESOURCE_EXHAUSTED with a retry hint), any other answer,
p50/p99 and the slowest of every answer's seconds (scored and refused alike) and of the
scored ones, scores that differ from the batch prediction's, and the training job's end
(SUCCEEDED, never PAUSED). The machine is shared: the load average is printed.
"""

from __future__ import annotations

import argparse
import csv
import os
import tempfile
from pathlib import Path

import grpc
import yaml
from vfl.party.config import ScoringLimits

from bench.jobs import binary_model, job_spec
from tests.support.data import FATE, breast_datasets_config
from tests.support.jobs import checkpointed_breast_job
from tests.support.processes import Daemons
from tests.support.scoring_load import (
    Clients,
    Outcome,
    StateLog,
    batch_scores,
    burst,
    percentile,
)

TOL = 1e-5  # an online score against the batch one
SCORING = ScoringLimits().model_dump()  # the defaults
CLIENTS = 4  # client processes the calls of a burst are dealt to


def model_spec(protocol: str, key_bits: int) -> str:
    spec = job_spec(
        f"model-{protocol}",
        protocol,
        {"dataset": "breast"},
        {"dataset": "breast"},
        key_bits=key_bits if protocol == "blindfl" else None,
        model=binary_model(4, [8]),
        train={"epochs": 1, "batch_size": 64},
        validation={"every": 1000},
    )
    return yaml.safe_dump(spec)


TRAINING = yaml.safe_dump(
    {
        **checkpointed_breast_job("training", "breast", epochs=10),
        "network": {"bandwidth_mbps": 200, "rtt_ms": 40},
    }
)


def breast_ids() -> list[str]:
    with (FATE / "breast_hetero_guest.csv").open() as fh:
        return [row["id"] for row in csv.DictReader(fh)]


def start(workdir: Path) -> tuple[Daemons, str]:
    daemons = Daemons(workdir)
    daemons.start_coordinator()
    port = 0
    for party, datasets in breast_datasets_config().items():
        body = {"party": party, "coordinator": daemons.address, "datasets": datasets}
        (workdir / f"{party}.yaml").write_text(yaml.safe_dump({**body, "scoring": SCORING}))
        bound = daemons.start_party(party, datasets)
        port = bound if party == "bank" else port
    return daemons, f"127.0.0.1:{port}"


def run_burst(daemons: Daemons, clients: Clients, model: str, expected, calls: int) -> dict:
    with daemons.client() as client:
        job_id = client.submit(TRAINING)
    daemons.wait(job_id, lambda v: v.state == "TRAINING")
    states = StateLog(daemons.address, job_id)
    outcomes = clients.burst(model, breast_ids(), calls)
    with daemons.client() as client:
        during = client.get(job_id).state
    seen = states.wait(timeout=300)
    with daemons.client() as client:
        resumed = client.get(job_id).result.resumed_from
    return summary(outcomes, expected, during, seen, resumed)


def summary(outcomes: list[Outcome], expected, during: str, seen: list[str], resumed: int):
    scored = [o for o in outcomes if o.code == grpc.StatusCode.OK]
    refused = [o for o in outcomes if o.code == grpc.StatusCode.RESOURCE_EXHAUSTED]
    hinted = [o for o in refused if o.retry_after_s]
    every = [o.seconds for o in outcomes]
    ok_s = [o.seconds for o in scored]
    return {
        "calls": len(outcomes),
        "scored": len(scored),
        "refused": len(refused),
        "hinted": len(hinted),
        "other": len(outcomes) - len(scored) - len(refused),
        "max_s": max(every),
        "p50_s": percentile(every, 0.5),
        "p99_s": percentile(every, 0.99),
        "scored_p50_s": percentile(ok_s, 0.5),
        "scored_p99_s": percentile(ok_s, 0.99),
        "scored_max_s": max(ok_s, default=0.0),
        "wrong": sum(abs((o.score or 0.0) - expected[o.id]) > TOL for o in scored),
        "training": f"{during} -> {seen[-1] if seen else '?'}"
        + (" (paused)" if "PAUSED" in seen or resumed else ""),
    }


HEADER = (
    "| protocol | calls | scored | refused (hinted) | other | p50 / p99 / max s (all) | "
    "p50 / p99 / max s (scored) | wrong scores | training job |\n"
    "|---|---|---|---|---|---|---|---|---|"
)


def row(protocol: str, r: dict) -> str:
    return (
        f"| {protocol} | {r['calls']} | {r['scored']} ({100 * r['scored'] / r['calls']:.1f}%) "
        f"| {r['refused']} ({r['hinted']}) | {r['other']} | "
        f"{r['p50_s']:.3f} / {r['p99_s']:.3f} / {r['max_s']:.3f} | {r['scored_p50_s']:.3f} / "
        f"{r['scored_p99_s']:.3f} / {r['scored_max_s']:.3f} | {r['wrong']} | {r['training']} |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(
        prog="python -m bench.overload", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--calls", type=int, nargs="+", default=[200, 1000])
    ap.add_argument("--protocol", nargs="+", default=["split", "blindfl"])
    ap.add_argument("--key-bits", type=int, default=1024, help="blindfl keys (< 2048: test keys)")
    ap.add_argument("--clients", type=int, default=CLIENTS, help="client processes of a burst")
    ap.add_argument("--out", type=Path, help="also write the table here")
    args = ap.parse_args()
    lines = [
        f"python -m bench.overload --calls {' '.join(map(str, args.calls))} --protocol "
        f"{' '.join(args.protocol)} --key-bits {args.key_bits} --clients {args.clients}; "
        f"bank scoring {SCORING}; "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}",
        "",
        HEADER,
    ]
    print("\n".join(lines), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        daemons, bank = start(Path(tmp))
        try:
            for protocol in args.protocol:
                with daemons.client() as client:
                    model = client.submit(model_spec(protocol, args.key_bits))
                view = daemons.wait(model, lambda v: v.state in ("SUCCEEDED", "FAILED"), 600)
                assert view.state == "SUCCEEDED", view.reason
                with daemons.client() as client:
                    expected = batch_scores(client, model, Path(tmp) / "bank-state" / "predictions")
                burst(bank, model, breast_ids()[:1], 1)  # loads the model, opens its session
                for calls in args.calls:
                    with Clients(bank, args.clients) as clients:
                        result = run_burst(daemons, clients, model, expected, calls)
                    line = row(protocol, result)
                    print(line, flush=True)
                    lines.append(line)
        finally:
            daemons.stop()
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
