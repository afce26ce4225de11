"""Online scoring in bench/predict.py: one id per request at a model's active party, as
`vfl score` asks it; the latency of sequential requests, the scores per second of
`ONLINE_CLIENTS` concurrent clients, and their table.
"""

from __future__ import annotations

import threading
import time

import numpy as np
from vfl.coordinator.client import CoordinatorClient
from vfl.proto import party_pb2, party_pb2_grpc
from vfl.rpc import dial

ONLINE_CLIENTS = 8


def measure_online(
    client: CoordinatorClient, model: str, ids: list[str], requests: int, seconds: float
) -> dict:
    """Online scoring of model `model` at its active party, as `vfl score` asks it: over
    one kept mutual-TLS channel per client, one id per request. The first request (it
    loads the model and opens the scoring session with the passive party) is timed on
    its own; then `requests` requests one after another give p50, p95 and p99; then 8
    clients in threads, each sending one-id requests back to back for `seconds`,
    give the scores per second (their requests share micro-batches)."""
    party, address = client.locate_model(model)
    tls = client.tls
    rng = np.random.default_rng(1)

    def request() -> party_pb2.PredictRequest:
        return party_pb2.PredictRequest(model_id=model, ids=[ids[rng.integers(len(ids))]])

    def stub_of(channel) -> party_pb2_grpc.PartyServiceStub:
        return party_pb2_grpc.PartyServiceStub(channel)

    with dial(address, tls, expect=party) as channel:
        stub = stub_of(channel)
        begun = time.perf_counter()
        first = stub.Predict(request(), timeout=120)
        first_s = time.perf_counter() - begun
        if first.results[0].error:
            raise SystemExit(f"online scoring failed: {first.results[0].message}")
        latencies = []
        for _ in range(requests):
            begun = time.perf_counter()
            stub.Predict(request(), timeout=60)
            latencies.append(time.perf_counter() - begun)
    scored: list[int] = []
    stop = time.perf_counter() + seconds

    def client_loop() -> None:
        done = 0
        with dial(address, tls, expect=party) as channel:
            stub = stub_of(channel)
            while time.perf_counter() < stop:
                reply = stub.Predict(request(), timeout=60)
                done += sum(1 for r in reply.results if not r.error)
        scored.append(done)

    begun = time.perf_counter()
    threads = [threading.Thread(target=client_loop) for _ in range(ONLINE_CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - begun
    ms = np.array(latencies) * 1e3
    return {
        "first_request_s": first_s,
        "p50_ms": float(np.percentile(ms, 50)),
        "p95_ms": float(np.percentile(ms, 95)),
        "p99_ms": float(np.percentile(ms, 99)),
        "requests": requests,
        "per_second_8_clients": sum(scored) / elapsed,
    }


def print_online(args, online: dict[str, dict] | None) -> None:
    if online is None:
        print("online: not measured (--no-online)")
        return
    print(
        f"\nonline ({args.key_bits}-bit keys, {args.rows:,} rows; one id per request, "
        "sequential; the first request loads the model and opens the session)"
    )
    print("| model | first request s | p50 ms | p95 ms | p99 ms | 8 clients: scores/s |")
    print("|---|---|---|---|---|---|")
    for name, r in online.items():
        print(
            f"| {name} | {r['first_request_s']:.2f} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} "
            f"| {r['p99_ms']:.1f} | {r['per_second_8_clients']:.1f} |"
        )
    for name, r in online.items():
        if "scans" in r:
            print(
                f"{name}: PostgreSQL counted {r['scans']:,} scans of the shop's table in the "
                f"run, {r['index_scans']:,} through its primary key (a lookup per "
                "micro-batch; training's snapshot and the column check are the others)"
            )
