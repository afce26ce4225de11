"""Chaos: the faults of the hostile rounds, injected one after another into one federation.

    python -m bench.chaos                                   every fault
    python -m bench.chaos --short                           the CI form (a few faults)
    python -m bench.chaos --out bench/results/chaos.txt

One federation as `vfl run` starts it (`vfl.local`): a coordinator and three party
daemons with mutual TLS: "bank" (active) and "shop" (passive) train a checkpointed split
job on the breast data (10 epochs over an emulated 40 ms link, the deterministic CELU
schedule, so a resumed run must end exactly where an uninterrupted one ends), and
"mallory", a member of the federation with a valid certificate that is in no job. First
one run without a fault gives the reference AUC and seconds; then, per fault, one job
with the fault injected while it trains, driven to its end as an operator would (start a
killed daemon again, free the disk, put the data back, `vfl resume`):

- kill -9 shop, bank, the coordinator: at the checkpoint of round 20, started again;
  the processes of its tree alive 3 s later are counted;
- a full disk: the shop's state directory on an 8 MB tmpfs (root only), filled at round
  20, freed once the job paused;
- changed data under a resume: shop killed, its table's values changed (same ids), shop
  started, the job resumed; then the table put back;
- stalled streams: 40 `Push` streams from mallory to bank that send a header, then nothing;
- an oversized envelope: mallory declares 512 MB to bank and streams it (the bytes sent
  before the refusal);
- unknown tags from a real peer: with shop's own certificate, 3 envelopes of 64 MB with
  tags no job takes (the memory bank holds after the job);
- a malformed envelope: mallory's garbage under the job's next tag;
- a burst: 1,000 concurrent `Predict` calls (200 with --short) on the reference model,
  against the batch prediction's scores.

A job is lost unless it ends SUCCEEDED with the reference AUC (1e-6) (a fault's job may
pause on the way); a process is left when a killed daemon's worker outlives it, or any
process of the federation outlives its stop; a wrong result is a job's AUC off the
reference or a scored row off the batch prediction's score. The table says per fault what
was injected, what the job did, and what was lost.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import yaml
from vfl.contract.spec import TableSource
from vfl.local.run import LocalProcesses, launched
from vfl.party.memory import tree_bytes
from vfl.proto import party_pb2, party_pb2_grpc
from vfl.rpc import dial
from vfl.secure.pki import load_identity

from bench.chaos_parts import (
    HEADER,
    LEFTOVER_WAIT_S,
    MB,
    Row,
    big,
    code_of,
    left_after_stop,
    line,
    short,
    stalled,
    summarise,
)
from bench.procs import alive, killed, session_members
from tests.support.data import FATE
from tests.support.disk import fill, mount_tmpfs, scaled, unmount
from tests.support.jobs import checkpointed_breast_job
from tests.support.scoring_load import batch_scores, burst, percentile

ENDED = ("SUCCEEDED", "FAILED", "CANCELLED")
TOL = 1e-6  # a job's AUC against the reference
SCORE_TOL = 1e-5  # an online score against the batch prediction's


class Chaos:
    """One federation, one job per fault."""

    def __init__(self, fed: LocalProcesses, shop_table: Path, epochs: int) -> None:
        self.fed, self.shop_table, self.epochs = fed, shop_table, epochs
        self.spec = yaml.safe_dump(
            {
                **checkpointed_breast_job("chaos", "breast", epochs=epochs),
                "network": {"bandwidth_mbps": 200, "rtt_ms": 40},
            }
        )
        self.reference_auc = 0.0
        self.reference_s = 0.0
        self.model = ""

    # --- jobs -------------------------------------------------------------------------

    def submit(self) -> str:
        return self.fed.client.submit(self.spec)

    def wait(self, job_id: str, until: Callable, timeout: float = 300.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                view = self.fed.client.get(job_id)
            except Exception:  # noqa: BLE001 - the coordinator may be down for a moment
                time.sleep(0.2)
                continue
            if until(view):
                return view
            time.sleep(0.05)
        raise TimeoutError(f"job {job_id}: still {view.state} after {timeout:.0f} s")

    def at_round(self, job_id: str, rnd: int = 20):
        return self.wait(job_id, lambda v: v.result.checkpoint_round >= rnd or v.state in ENDED)

    def resume(self, job_id: str) -> None:
        out = self.fed.vfl("resume", job_id)
        if out.returncode != 0:
            raise RuntimeError(f"vfl resume {job_id}: {out.stderr.strip()}")

    def finish(self, row: Row, job_id: str, states: list[str]) -> None:
        """Wait for the job's end, resuming it once if it pauses; score it."""
        view = self.wait(job_id, lambda v: v.state in (*ENDED, "PAUSED"))
        if view.state == "PAUSED":
            states.append(f"PAUSED ({short(view.reason)})")
            self.resume(job_id)
            view = self.wait(job_id, lambda v: v.state in (*ENDED, "PAUSED"))
        states.append(view.state)
        row.job = " -> ".join(states)
        auc = view.result.metrics.get("auc")
        if view.state != "SUCCEEDED":
            row.lost += 1
            row.notes.append(short(view.reason))
        elif auc is None or abs(auc - self.reference_auc) > TOL:
            row.wrong += 1
            row.notes.append(f"AUC {auc} against {self.reference_auc}")

    def reference(self) -> None:
        begun = time.monotonic()
        job_id = self.submit()
        view = self.wait(job_id, lambda v: v.state in ENDED)
        if view.state != "SUCCEEDED":
            raise RuntimeError(f"the reference job {view.state}: {view.reason}")
        self.reference_s = time.monotonic() - begun
        self.reference_auc = view.result.metrics["auc"]
        self.model = job_id

    # --- faults -----------------------------------------------------------------------

    def kill(self, name: str) -> Row:
        row = Row(f"kill -9 {name}", f"SIGKILL at round 20, {name} started again")
        job_id = self.submit()
        self.at_round(job_id)
        daemon = self.fed.topology.daemon(name)
        pid = daemon.pid
        before = killed(daemon)
        time.sleep(LEFTOVER_WAIT_S)
        row.left = len({p for p in before if alive(p)} | set(session_members(pid)))
        self.fed.topology.restart(name)
        states: list[str] = []
        if name != "coordinator":
            view = self.wait(job_id, lambda v: v.state in (*ENDED, "PAUSED"))
            if view.state == "PAUSED":
                states.append("PAUSED")
                self.resume(job_id)
        self.finish(row, job_id, states)
        return row

    def full_disk(self, state_dir: Path, mounted: bool) -> Row:
        row = Row("full disk", "shop's state directory filled at round 20, freed once paused")
        if not mounted:
            row.job = "skipped: mounting a tmpfs needs root"
            return row
        job_id = self.submit()
        self.at_round(job_id)
        filler = fill(state_dir)
        view = self.wait(job_id, lambda v: v.state in (*ENDED, "PAUSED"))
        states = [f"{view.state} ({short(view.reason)})"]
        filler.unlink()
        if view.state == "PAUSED":
            self.resume(job_id)
        self.finish(row, job_id, states)
        return row

    def changed_data(self) -> Row:
        row = Row("changed data under a resume", "shop killed; a column x1000, same ids")
        original = self.shop_table.read_text()
        job_id = self.submit()
        self.at_round(job_id)
        killed(self.fed.topology.daemon("shop"))
        self.wait(job_id, lambda v: v.state in (*ENDED, "PAUSED"))
        self.shop_table.write_text(scaled(original))
        self.fed.topology.restart("shop")
        self.resume(job_id)
        view = self.wait(job_id, lambda v: v.state in (*ENDED, "PAUSED"))
        states = [f"resumed: {view.state} ({short(view.reason)})"]
        self.shop_table.write_text(original)  # the operator puts the data back
        if view.state == "PAUSED":
            states.append("data put back")
            self.resume(job_id)
        self.finish(row, job_id, states)
        return row

    def stalled_streams(self, streams: int) -> Row:
        row = Row("stalled streams", f"{streams} Push streams from mallory to bank, all silent")
        begun = time.monotonic()
        job_id = self.submit()
        self.wait(job_id, lambda v: v.state == "TRAINING" or v.state in ENDED)
        stop = threading.Event()
        with self.channel("mallory", "bank") as channel:
            stub = party_pb2_grpc.PartyServiceStub(channel)
            calls = [
                stub.Push.future(stalled(job_id, "mallory", "bank", stop), timeout=120)
                for _ in range(streams)
            ]
            states: list[str] = []
            self.finish(row, job_id, states)
            stop.set()
            answers = [code_of(c) for c in calls]
        seconds = time.monotonic() - begun
        row.notes.append(
            f"job {seconds:.1f} s against {self.reference_s:.1f} s alone; the streams: "
            f"{summarise(answers)}"
        )
        row.expect(seconds <= 2 * self.reference_s, "the job went on at full speed")
        return row

    def oversized(self, declared: int) -> Row:
        row = Row("oversized envelope", f"mallory declares {declared // MB} MB to bank")
        job_id = self.submit()
        self.wait(job_id, lambda v: v.state == "TRAINING" or v.state in ENDED)
        sent = [0]
        with self.channel("mallory", "bank") as channel:
            stub = party_pb2_grpc.PartyServiceStub(channel)
            chunks = big(job_id, "mallory", "bank", "train/r999/act", declared, sent)
            code = code_of(stub.Push.future(chunks, timeout=60))
        states: list[str] = []
        self.finish(row, job_id, states)
        row.notes.append(f"{code}; {sent[0] / MB:.1f} MB sent before the refusal")
        row.expect(code != "taken" and sent[0] < 10 * MB, "refused before 10 MB was read")
        return row

    def unknown_tags(self, envelopes: int, size: int) -> Row:
        row = Row(
            "unknown tags from a real peer",
            f"{envelopes} x {size // MB} MB with shop's own certificate",
        )
        bank = self.fed.topology.parties["bank"]
        job_id = self.submit()
        self.wait(job_id, lambda v: v.state == "TRAINING" or v.state in ENDED)
        held_before = tree_bytes(bank.pid)
        codes = []
        with self.channel("shop", "bank") as channel:
            stub = party_pb2_grpc.PartyServiceStub(channel)
            for n in range(envelopes):
                chunks = big(job_id, "shop", "bank", f"junk/{n}", size, [0])
                codes.append(code_of(stub.Push.future(chunks, timeout=60)))
        states: list[str] = []
        self.finish(row, job_id, states)
        time.sleep(3.0)  # the guard hands memory back
        grown = (tree_bytes(bank.pid) - held_before) / MB
        row.notes.append(f"{summarise(codes)}; bank holds {grown:+.0f} MB after the job")
        row.expect(grown < size * envelopes / 2 / MB, "the envelopes' memory was handed back")
        return row

    def malformed(self) -> Row:
        row = Row("malformed envelope", "mallory's garbage under the job's next tag")
        job_id = self.submit()
        self.wait(job_id, lambda v: v.state == "TRAINING" or v.state in ENDED)
        with self.channel("mallory", "bank") as channel:
            stub = party_pb2_grpc.PartyServiceStub(channel)
            payload = os.urandom(4096)
            chunk = party_pb2.PushChunk(
                job_id=job_id,
                tag="train/r30/act",
                sender="mallory",
                receiver="bank",
                data=payload,
                total_size=len(payload),
            )
            code = code_of(stub.Push.future(iter([chunk]), timeout=30))
        states: list[str] = []
        self.finish(row, job_id, states)
        row.notes.append(code)
        return row

    def burst(self, calls: int) -> Row:
        row = Row("burst", f"{calls} concurrent Predict calls during training")
        expected = batch_scores(self.fed.client, self.model, self.predictions())
        bank = self.fed.topology.parties["bank"]
        tls = self.fed.client.tls
        ids = list(expected)
        burst(bank.address, self.model, ids[:1], 1, tls=tls, expect="bank")  # loads it
        job_id = self.submit()
        self.wait(job_id, lambda v: v.state == "TRAINING" or v.state in ENDED)
        outcomes = burst(bank.address, self.model, ids, calls, tls=tls, expect="bank")
        states: list[str] = []
        self.finish(row, job_id, states)
        scored = [o for o in outcomes if o.code == grpc.StatusCode.OK]
        wrong = sum(abs((o.score or 0.0) - expected[o.id]) > SCORE_TOL for o in scored)
        row.wrong += wrong
        p99 = percentile([o.seconds for o in scored], 0.99)
        row.notes.append(f"{len(scored)}/{calls} scored, p99 {p99:.3f} s, {wrong} wrong")
        row.expect(len(scored) == calls and p99 <= 1.0, "every call scored within 1 s (p99)")
        return row

    # --- plumbing -----------------------------------------------------------------------

    def channel(self, identity: str, party: str) -> grpc.Channel:
        assert self.fed.tls_dir is not None
        files = load_identity(self.fed.tls_dir, identity)
        return dial(self.fed.topology.parties[party].address, files, expect=party)

    def predictions(self) -> Path:
        return self.fed.base / "bank-state" / "predictions"


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.chaos", description=__doc__.split("\n")[0])
    ap.add_argument("--short", action="store_true", help="the CI form: four faults, smaller")
    ap.add_argument("--out", type=Path, help="also write the table here")
    args = ap.parse_args()
    calls, streams = (200, 10) if args.short else (1000, 40)
    out = [
        f"python -m bench.chaos{' --short' if args.short else ''}; {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.2f}",
        "",
        HEADER,
    ]
    print("\n".join(out), flush=True)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="vfl-chaos-") as tmp:
        base = Path(tmp) / "fed"
        shop_table = Path(tmp) / "shop.csv"
        shutil.copyfile(FATE / "breast_hetero_host.csv", shop_table)
        mounted = not args.short and mount_tmpfs(base / "shop-state", "8m") is None
        datasets = {
            "bank": {"breast": TableSource(path=str(FATE / "breast_hetero_guest.csv"), label="y")},
            "shop": {"breast": TableSource(path=str(shop_table))},
            "mallory": {"breast": TableSource(path=str(FATE / "breast_hetero_host.csv"))},
        }
        try:
            with launched(datasets, base) as fed:
                chaos = Chaos(fed, shop_table, epochs=4 if args.short else 10)
                chaos.reference()
                faults: list[Callable[[], Row]] = [
                    lambda: chaos.kill("shop"),
                    lambda: chaos.stalled_streams(streams),
                    lambda: chaos.oversized(512 * MB),
                    lambda: chaos.burst(calls),
                ]
                if not args.short:
                    faults[1:1] = [
                        lambda: chaos.kill("bank"),
                        lambda: chaos.kill("coordinator"),
                        lambda: chaos.full_disk(base / "shop-state", mounted),
                        lambda: chaos.changed_data(),
                    ]
                    faults += [lambda: chaos.unknown_tags(3, 64 * MB), chaos.malformed]
                for fault in faults:
                    rows.append(fault())
                    print(line(rows[-1]), flush=True)
                stop = Row("stop", "every daemon stopped (SIGTERM)")
                stop.left = left_after_stop(fed)
                stop.job = "-"
                rows.append(stop)
                print(line(stop), flush=True)
        finally:
            if mounted:
                unmount(base / "shop-state")
    total = (
        f"\nTotal: {sum(r.lost for r in rows)} jobs lost, {sum(r.left for r in rows)} "
        f"processes left, {sum(r.wrong for r in rows)} wrong results, "
        f"{sum(bool(r.broken) for r in rows)} promises broken."
    )
    print(total, flush=True)
    out += [line(r) for r in rows] + [total]
    if args.out:
        args.out.write_text("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
