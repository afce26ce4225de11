"""Batch prediction with a stored model through real daemons, next to the floor of its
cryptography, and online scoring's latency and throughput.

    python -m bench.predict                                N=6,000 rows, 2048-bit keys
    python -m bench.predict --rows 1000 --key-bits 1024    a smoke run
    python -m bench.predict --out bench/results/predict.json
    python -m bench.predict --sql --no-batch                online scoring, also with the
                                                           shop's rows in PostgreSQL

Data: the credit shape (bench/credit_data.py: 13 dense features and the label at "bank",
10 at "shop", the same N ids at both), written to a temporary folder. A coordinator and
both party daemons run as `vfl run` starts them (processes, gRPC with mutual TLS on
loopback, all on this machine's cores). Each protocol trains one model on the N rows
(source out_dim 16, top [32], batch 256, one epoch), then a prediction job scores the N
rows with it, as `vfl predict MODEL --data bank=data --data shop=data` submits it (PSI,
then the stored model's forward pass batch by batch). Reported per protocol: the job's
own seconds (the coordinator's clock, launch to the last party's end), the wall seconds
from submitting to SUCCEEDED as the client sees them, rows per second (of the job's
seconds), the PSI's share, and the CPU seconds both party daemons and their worker
processes spent (Linux /proc): unlike the wall time, that barely moves with other load
on the machine, and it compares with the floor's CPU seconds.

The floor (blindfl): what the forward pass's cryptography costs on these cores at best.
Per batch of n rows the MatMul source layer packs k rows into each ciphertext of m1 and
m2 (k = slots // out_dim, chosen by the layer's cost model; 3 at 2048 bits for out_dim 16),
so it sends ceil(n / k) ciphertexts each way; the passive party decrypts m1 and
re-randomises m2 with obfuscators for the active party's key, the active party
re-randomises m1 (for the passive party's key) and decrypts m2. The modular products
are those the multi-exponentiation kernel's own cost model counts for the two products
(X_B [[U_B]] and X_A [[V_A]], on the grouped exponents of these very rows), plus three
per ciphertext and party (plaintext addition, re-randomisation). Each primitive is timed
here at the run's key size (the minimum of a few repeats, one core), and

    floor = (decryptions x t_dec + obfuscators x t_obf + products x t_mul) / cores.

The per-job constants (loading the model, the fixed-base tables, worker processes) and
the PSI are outside the floor. The machine is shared with other work: the load average
is printed, and the ratios come from one run.

Online scoring (blindfl): one id per request, as `vfl score` asks it, at the active
party; p50, p95 and p99 of sequential requests, and the scores per second of 8
concurrent clients. With `--sql` the shop's rows are also put in a throwaway PostgreSQL
server (bench/postgres_rows.py: table `shop_rows`, its id an int8 primary key), a second
blindfl model is trained with the shop reading that table (dataset `pg`), and its
online scoring, which looks each micro-batch's ids up in PostgreSQL at the shop (one
indexed query per micro-batch, through the dataset's pooled connection), is measured
next to the model whose shop rows are a CSV file held in memory.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import ssl
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict
from pathlib import Path

import numpy as np
import yaml
from prometheus_client.parser import text_string_to_metric_families
from vfl.cli.progress import follow
from vfl.contract.spec import DataSpec, JobSpec, TableSource, parse_spec
from vfl.contract.spec.predict import PredictSpec
from vfl.local.run import LocalProcesses, launched, spec_to_yaml
from vfl.local.topology import as_datasets, spec_datasets
from vfl.secure.executor import ComputeConfig
from vfl.secure.pki.federation import ADMIN_ID, load_identity

from bench.credit_data import credit_arrays, credit_job, credit_tables
from bench.floor import Counts, MatmulCounter, cores, time_primitives
from bench.jobs import predict_request
from bench.postgres_rows import rows_in_postgres
from bench.predict_online import measure_online, print_online
from bench.procs import tree_cpu_seconds

OUT_DIM, TOP, TRAIN_BATCH = 16, [32], 256
KEPT = ComputeConfig().kept_obfuscators  # a party daemon's kept pool, full
ONLINE_SEQUENTIAL, ONLINE_SECONDS = 200, 10.0
PROTOCOLS = ("split", "blindfl")
FROM_FILE = "blindfl, the shop's rows in a CSV file (in memory)"
FROM_SQL = "blindfl, the shop's rows in PostgreSQL (looked up by id)"


def job_spec(protocol: str, key_bits: int, tables: dict) -> JobSpec:
    model = {"out_dim": OUT_DIM, "hidden": TOP, "batch": TRAIN_BATCH}
    return parse_spec(credit_job(protocol, tables, key_bits, 1, {"every": 10_000}, **model))


class Federation:
    """A coordinator and the two party daemons as local processes with mutual TLS
    (`vfl.local`'s), their metrics served, and the spec that reads their datasets."""

    def __init__(self, procs: LocalProcesses, spec: JobSpec) -> None:
        self.workdir, self.topology, self.client = procs.base, procs.topology, procs.client
        self.local_spec = as_datasets(spec)
        assert procs.tls_dir is not None
        admin = load_identity(procs.tls_dir, ADMIN_ID)
        # the daemons' metrics answer a certificate of the federation (HTTPS with --tls);
        # theirs name the parties, not the loopback address the URL has
        self.scraper = ssl.create_default_context(cafile=str(admin.ca_cert))
        self.scraper.check_hostname = False
        self.scraper.load_cert_chain(admin.cert, admin.key)

    @classmethod
    @contextmanager
    def started(
        cls, workdir: Path, spec: JobSpec, more: dict[str, dict[str, TableSource]]
    ) -> Iterator[Federation]:
        """`more`: datasets a party's config has besides "data" (e.g. the shop's "pg")."""
        datasets = spec_datasets(spec)  # parties serve the files as "data"
        for party, tables in more.items():
            datasets[party].update(tables)
        with launched(datasets, workdir, ("--metrics", "127.0.0.1:0")) as procs:
            yield cls(procs, spec)

    def train(self, spec: JobSpec, shop: str = "data") -> str:
        """Train `spec` (its parties' data rewritten to the daemons' "data", the shop's to
        its dataset `shop`); the model id."""
        local = spec.model_copy(update={"parties": self.local_spec.parties})
        local = local.with_data("shop", DataSpec(dataset=shop))
        job_id = self.client.submit(spec_to_yaml(local))
        view = follow(self.client, job_id, show=False)
        if view.state != "SUCCEEDED":
            raise SystemExit(f"training {spec.protocol} failed: {view.reason}")
        return job_id

    def predict(self, model: str, batch_size: int | None) -> dict:
        request = predict_request(model)
        if batch_size:
            request["batch_size"] = batch_size
        ready = self.ready()
        cpu = self.party_cpu_seconds()
        begun = time.perf_counter()
        job_id = self.client.predict(yaml.safe_dump(request))
        view = follow(self.client, job_id, show=False)
        wall = time.perf_counter() - begun
        cpu = self.party_cpu_seconds() - cpu
        if view.state != "SUCCEEDED":
            raise SystemExit(f"prediction with {model} failed: {view.reason}")
        r = view.result
        return {
            "seconds": r.seconds,
            "wall_seconds": wall,
            "psi_seconds": r.psi_seconds,
            "scored": r.prediction.scored,
            "auc": r.metrics.get("auc"),
            "party_seconds": {p: t.seconds for p, t in r.parties.items()},
            "cpu_seconds": cpu,
            "ready_before": ready,
        }

    def ready(self) -> dict[str, float]:
        """Obfuscators each party daemon keeps ready for the other's key (its metrics)."""
        peer = {"bank": "shop", "shop": "bank"}
        out = {}
        for party, other in peer.items():
            text = (self.workdir / f"party-{party}.log").read_text()
            url = re.search(r"metrics on (https?://\S+)", text)
            if url is None:
                raise SystemExit(f"party {party} printed no metrics address")
            with urllib.request.urlopen(url.group(1), timeout=10, context=self.scraper) as resp:
                families = text_string_to_metric_families(resp.read().decode())
                out[party] = sum(
                    s.value
                    for f in families
                    for s in f.samples
                    if s.name == "vfl_party_obfuscators_ready" and s.labels.get("key") == other
                )
        return out

    def wait_ready(self, count: int, timeout_s: float = 300.0) -> float:
        """Wait until both parties keep `count` obfuscators ready; the seconds waited."""
        begun = time.perf_counter()
        while min(self.ready().values()) < count and time.perf_counter() - begun < timeout_s:
            time.sleep(1.0)
        return time.perf_counter() - begun

    def party_cpu_seconds(self) -> float:
        """CPU seconds the party daemons and their processes (pools, helpers) used so far."""
        pids = [d.pid for d in self.topology.parties.values()]
        return sum(tree_cpu_seconds(pid) for pid in pids)


def forward_counts(x_bank: np.ndarray, x_shop: np.ndarray, key_bits: int, batch: int):
    """The cryptographic work of scoring these rows in batches of `batch` (m1 per batch)."""
    counter = MatmulCounter(key_bits, OUT_DIM, x_bank.shape[1], x_shop.shape[1])
    counts = Counts()
    for start in range(0, len(x_bank), batch):
        part = slice(start, start + batch)
        counts.add(counter.batch(x_bank[part], x_shop[part], train=False, m1=True))
    counts.notes = {"slots": counter.packer.slots, "rows_per_cipher": counter.layout.rows}
    return counts


# --- Report ---------------------------------------------------------------------------
def print_table(args, results: dict, counts: Counts, cost: dict[str, float]) -> None:
    """One row per measured prediction; the floor of the blindfl rows is the whole
    forward's, the in-job floor leaves out the obfuscators the parties had ready."""
    print(
        f"\nBatch prediction of {args.rows:,} credit rows (13 + 10 dense features, out_dim "
        f"{OUT_DIM}, top {TOP}), {args.key_bits}-bit keys, batches of {args.batch}, "
        f"daemons over gRPC + TLS, {os.cpu_count()} cores"
    )
    print(
        "| run | rows | job s | PSI s | rows/s | obfuscators ready | floor s | job / floor "
        "| in-job floor s | job / in-job floor | parties' CPU s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    n = cores()
    for name, r in results.items():
        cells = ["-"] * 5
        if name.startswith("blindfl"):
            floor, ready = counts.seconds(cost) / n, sum(r["ready_before"].values())
            in_job = floor - min(ready, counts.obfuscators) * cost["obfuscator"] / n
            r["floor_seconds"], r["in_job_floor_seconds"] = floor, in_job
            cells = [
                f"{ready:,.0f}",
                f"{floor:.2f}",
                f"{r['seconds'] / floor:.2f}x",
                f"{in_job:.2f}",
                f"{r['seconds'] / in_job:.2f}x",
            ]
        print(
            f"| {name} | {r['scored']:,} | {r['seconds']:.2f} | {r['psi_seconds']:.2f} "
            f"| {r['scored'] / r['seconds']:,.0f} | {' | '.join(cells)} | {r['cpu_seconds']:.1f} |"
        )


def print_floor(counts: Counts, cost: dict[str, float], floor: float) -> None:
    ms = {k: v * 1e3 for k, v in cost.items()}
    print(
        f"\nfloor: {counts.notes['slots']} slots per ciphertext, rows per m1/m2 ciphertext: "
        f"{counts.notes['rows_per_cipher']} -> {counts.ciphertexts // 2:,} ciphertexts each way;\n"
        f"  {counts.decryptions:,} decryptions x {ms['decrypt']:.2f} ms + "
        f"{counts.obfuscators:,} peer-key obfuscators x {ms['obfuscator']:.2f} ms + "
        f"{counts.products:,.0f} products mod n^2 x {ms['product'] * 1e3:.1f} us\n"
        f"  = {floor * (os.cpu_count() or 1):.2f} s of one core, {floor:.2f} s on "
        f"{os.cpu_count()} cores\n  not in it: the PSI, worker processes starting, and the "
        f"power tables of each peer key's\n  fixed-base table (a new table costs "
        f"{cost['table']:.2f} s; a model keeps its bases)\n"
        f"in-job floor: the same without the obfuscators a party had ready when the job began\n"
        f"  (its daemon keeps up to {KEPT:,} per peer key and computes them while it runs no job)"
    )


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench.predict", description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=6_000)
    ap.add_argument("--key-bits", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=PredictSpec.model_fields["batch_size"].default)
    ap.add_argument("--repeats", type=int, default=1, help="predictions per model (best)")
    ap.add_argument("--out", type=Path, help="write the results as JSON")
    ap.add_argument("--no-batch", action="store_true", help="skip batch prediction (and floor)")
    ap.add_argument("--no-online", action="store_true", help="skip online scoring")
    ap.add_argument(
        "--sql", action="store_true", help="also score online with the shop's rows in PostgreSQL"
    )
    ap.add_argument(
        "--online-requests", type=int, default=ONLINE_SEQUENTIAL, help="one-id requests timed"
    )
    ap.add_argument(
        "--online-seconds", type=float, default=ONLINE_SECONDS, help="8 clients' run length"
    )
    return ap.parse_args()


def predict_batches(args, federation: Federation, models: dict[str, str], load: list) -> dict:
    """Each model's batch prediction of every row (blindfl: also right after training)."""
    results: dict[str, dict] = {}
    for protocol in ("split", "blindfl"):
        model = models[protocol]
        if protocol == "blindfl":  # at once, the kept pools as training left them
            results["blindfl, right after training"] = federation.predict(model, args.batch)
        runs = []
        for _ in range(args.repeats):
            waited = federation.wait_ready(KEPT) if protocol == "blindfl" else 0.0
            runs.append({**federation.predict(model, args.batch), "waited_s": waited})
        results[protocol] = min(runs, key=lambda r: r["seconds"])
        load.append(os.getloadavg()[0])
    return results


def score_online(args, federation: Federation, models: dict[str, str]) -> dict[str, dict]:
    """Online scoring of the blindfl model(s), each once the kept pools are full."""
    ids = [str(i) for i in range(args.rows)]  # credit_tables: ids 0..N-1
    runs = {FROM_FILE: models["blindfl"]} | ({FROM_SQL: models["blindfl-sql"]} if args.sql else {})
    online = {}
    for name, model in runs.items():
        federation.wait_ready(KEPT)
        online[name] = measure_online(
            federation.client, model, ids, args.online_requests, args.online_seconds
        )
    return online


def run(args) -> tuple[dict, dict[str, dict] | None, list]:
    """Train, predict and score online; (batch results, online results, load averages)."""
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="bench-predict-") as tmp, ExitStack() as stack:
        tables = credit_tables(Path(tmp), args.rows)
        pg = stack.enter_context(rows_in_postgres(tables["shop"])) if args.sql else None
        more = {} if pg is None else {"shop": {"pg": pg.source}}  # the shop's dataset "pg"
        spec = job_spec("blindfl", args.key_bits, tables)
        with Federation.started(Path(tmp) / "run", spec, more) as federation:
            models = {p: federation.train(job_spec(p, args.key_bits, tables)) for p in PROTOCOLS}
            if args.sql:
                models["blindfl-sql"] = federation.train(spec, shop="pg")
            results = {} if args.no_batch else predict_batches(args, federation, models, load)
            online = None if args.no_online else score_online(args, federation, models)
            load.append(os.getloadavg()[0])
        if pg is not None and online is not None:  # the daemons ended: their counts flushed
            time.sleep(2.0)  # (a backend flushes its counts as it exits)
            online[FROM_SQL]["scans"], online[FROM_SQL]["index_scans"] = pg.scans()
    return results, online, load


def main() -> int:
    args = parse_args()
    results, online, load = run(args)
    out = {"rows": args.rows, "key_bits": args.key_bits, "batch": args.batch}
    out |= {"cores": os.cpu_count(), "results": results}
    if not args.no_batch:
        x_bank, x_shop, _ = credit_arrays(args.rows)
        counts = forward_counts(x_bank, x_shop, args.key_bits, args.batch)
        cost = time_primitives(args.key_bits)
        floor = counts.seconds(cost) / cores()
        print_table(args, results, counts, cost)
        print_floor(counts, cost, floor)
        out |= {"floor_seconds": floor, "counts": asdict(counts), "primitive_seconds": cost}
    print_online(args, online)
    print(f"load average (1 min) before and after each step: {load}; the machine is shared")
    if args.out:
        online = online or {}
        out |= {"online": online.get(FROM_FILE), "online_sql": online.get(FROM_SQL)}
        args.out.write_text(json.dumps(out | {"load_average": load}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
