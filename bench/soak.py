"""Soak: one federation under mixed load for an hour, with a party killed every few minutes.

    python -m bench.soak                              60 minutes
    python -m bench.soak --minutes 10 --json soak.json
    python -m bench.soak --minutes 3 --over-limit-every 0      no over-limit job

One federation (`vfl.local`'s): a coordinator and two party daemons, "bank" (active)
and "shop" (passive), as processes with mutual TLS, as `vfl run` starts them,
on the credit shape (bench/credit_data.py: 30,000 rows, 13 + 10 dense features). For
`--minutes` it runs, all at once:

- training jobs back to back, split and blindfl in turn (512-bit INSECURE test keys),
  each followed by a batch prediction of the whole table with the model it made;
- `--clients` (200) online scoring clients, threads of this process, each with its own
  mutual-TLS channel to the active party's daemon, sending one `Predict` of one random id
  at a time (deadline `--score-deadline`), with a random pause of mean `--think-ms`;
- every few minutes (uniformly 0.5 to 1.5 times `--kill-every`) a kill -9 of a random
  party daemon; 10 s later the processes of its tree still alive are counted (they must
  be none), then it is started again with the same config and state, and the job it
  paused is resumed with `vfl resume`;
- every `--over-limit-every` seconds (the first at half of it) a job whose top model has
  very wide hidden layers (`--over-limit-hidden`), which a party must refuse.

An operator on call (a thread) resumes every paused job with `vfl resume` once its
parties run (at most `MAX_RESUMES` times a job, then cancels it), and starts again a
daemon that died without being killed by the soak (an unplanned death, reported).
Afterwards no job is submitted and no daemon killed; the jobs still running get
`--drain-minutes` to end. A job is lost unless it ended SUCCEEDED, or FAILED for an
over-limit job. Reported: jobs finished and lost, daemon restarts, leftover processes
after each kill, peak resident memory of each daemon's processes (sampled every second),
and online scoring's p50/p99 and the shares of answered and refused (RESOURCE_EXHAUSTED)
calls. A markdown table (bench/soak_report.py), and with `--json FILE` everything as JSON.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

import grpc
import numpy as np
import yaml
from vfl.coordinator.errors import CoordinatorError
from vfl.local.run import LocalProcesses, launched
from vfl.proto import party_pb2, party_pb2_grpc
from vfl.rpc import dial

from bench.credit_data import credit_job, credit_tables
from bench.jobs import on_datasets, predict_request
from bench.procs import alive, killed, members, rss_bytes, session_members
from bench.soak_report import TERMINAL, Job, Record, summary, table

MAX_RESUMES = 3  # resumes of one job before the operator gives up and cancels it
LEFTOVER_WAIT_S = 10.0  # after a kill: processes of its tree alive this much later
OPERATOR_EVERY_S = 5.0


class Soak:
    def __init__(self, args: argparse.Namespace, workdir: Path) -> None:
        self.args = args
        self.tables = credit_tables(workdir, args.rows)
        self.workdir = workdir
        self._fed: LocalProcesses | None = None  # while it runs
        self.record = Record()
        self.stop = threading.Event()  # no more submissions or kills
        self.halt = threading.Event()  # everything stops (after the drain)
        self.model = ""  # the newest model, for online scoring
        self.ids = [str(i) for i in range(args.rows)]
        self.began = 0.0

    # --- jobs -------------------------------------------------------------------------

    def spec(self, protocol: str, hidden: list[int] | None = None) -> str:
        a = self.args
        epochs = a.split_epochs if protocol == "split" else a.blindfl_epochs
        raw = credit_job(
            protocol, self.tables, a.key_bits, epochs, {"fraction": 0.2}, hidden=hidden
        )
        return yaml.safe_dump(on_datasets(raw))

    def submit(self, kind: str, text: str) -> Job | None:
        """Submit a job (a prediction for kind "predict"), retrying while the coordinator
        does not answer; None once the soak halts."""
        client = self.fed.client
        while not self.halt.is_set():
            try:
                job_id = client.predict(text) if kind == "predict" else client.submit(text)
            except grpc.RpcError as exc:
                print(f"  submit {kind}: {exc.code().name}: {exc.details()}", file=sys.stderr)
                time.sleep(2.0)
                continue
            job = Job(job_id, kind, time.monotonic())
            with self.record.lock:
                self.record.jobs[job_id] = job
            return job
        return None

    def follow(self, job: Job) -> Job:
        """Poll the job until it ends (or the soak halts); the operator resumes it while
        it is paused."""
        client = self.fed.client
        while not self.halt.is_set():
            try:
                view = client.get(job.job_id)
            except grpc.RpcError:
                time.sleep(1.0)
                continue
            with self.record.lock:
                if view.state == "PAUSED" and (not job.pauses or job.pauses[-1] != view.reason):
                    job.pauses.append(view.reason)
                job.state, job.reason = view.state, view.reason
                if view.state in TERMINAL:
                    job.seconds = round(time.monotonic() - job.submitted, 2)
                    return job
            time.sleep(1.0)
        return job

    def trainer(self) -> None:
        """Training jobs back to back, each followed by a prediction with its model."""
        protocols = ["split", "blindfl"]
        n = 0
        while not self.stop.is_set():
            job = self.submit(protocols[n % 2], self.spec(protocols[n % 2]))
            n += 1
            if job is None or self.follow(job).state != "SUCCEEDED":
                continue
            self.model = job.job_id
            request = predict_request(job.job_id)
            predicted = self.submit("predict", yaml.safe_dump(request))
            if predicted is not None:
                self.follow(predicted)

    def over_limit(self) -> None:
        """A job with very wide hidden layers every `--over-limit-every` seconds."""
        every = self.args.over_limit_every
        due = self.began + every / 2
        while not self.stop.wait(max(0.0, due - time.monotonic())):
            due += every
            job = self.submit("over-limit", self.spec("split", self.args.over_limit_hidden))
            if job is not None:
                threading.Thread(target=self.follow, args=(job,), daemon=True).start()

    # --- kills and the operator on call --------------------------------------------------

    def killer(self) -> None:
        """kill -9 a random party daemon every few minutes; count what it leaves behind;
        start it again."""
        rng = random.Random(self.args.seed)
        while not self.stop.wait(self.args.kill_every * rng.uniform(0.5, 1.5)):
            party = rng.choice(sorted(self.fed.topology.parties))
            daemon = self.fed.topology.parties[party]
            pid, at = daemon.pid, round(time.monotonic() - self.began, 1)
            before = killed(daemon)
            time.sleep(LEFTOVER_WAIT_S)
            left = sorted({p for p in before if alive(p)} | set(session_members(pid)))
            self.restart(party)
            with self.record.lock:
                self.record.kills.append(
                    {"party": party, "at_s": at, "processes": len(before), "leftover": left}
                )
            print(
                f"  {at:7.1f} s: kill -9 {party} ({len(before)} processes): "
                f"{len(left)} left after {LEFTOVER_WAIT_S:.0f} s; restarted",
                file=sys.stderr,
            )

    def operator(self) -> None:
        """Start again a daemon that died unplanned; resume every paused job."""
        while not self.halt.wait(OPERATOR_EVERY_S):
            for name, daemon in self.fed.topology.parties.items():
                code = daemon.died()
                if code is None:
                    continue
                at = round(time.monotonic() - self.began, 1)
                print(f"  {at:7.1f} s: {name} died (exit {code}); restarting", file=sys.stderr)
                with self.record.lock:
                    self.record.unplanned.append({"party": name, "at_s": at, "exit": code})
                self.restart(name)
            if all(d.exited() is None for d in self.fed.topology.parties.values()):
                self.resume_paused()

    def restart(self, party: str) -> None:
        """Start a party daemon again (trying until it serves, or the soak halts)."""
        while not self.halt.is_set():
            try:
                self.fed.topology.restart(party)
            except CoordinatorError as exc:
                print(f"  restarting {party} failed, again in 5 s: {exc}", file=sys.stderr)
                time.sleep(5.0)
                continue
            with self.record.lock:
                self.record.restarts += 1
            return

    def resume_paused(self) -> None:
        with self.record.lock:
            paused = [j for j in self.record.jobs.values() if j.state == "PAUSED"]
        for job in paused:
            if job.resumes >= MAX_RESUMES:
                self.fed.vfl("cancel", job.job_id)
                continue
            out = self.fed.vfl("resume", job.job_id)
            if out.returncode == 0:
                with self.record.lock:
                    job.resumes += 1
                    job.state = "RESUMED"  # until the next poll

    # --- online scoring and memory ----------------------------------------------------

    def scorer(self, seed: int) -> None:
        """One online scoring client: one id per `Predict`, a random pause between."""
        rng = np.random.default_rng(seed)
        tls = self.fed.client.tls
        channel, address = None, ""
        while not self.stop.wait(rng.exponential(self.args.think_ms / 1e3)):
            if not self.model:
                continue
            bank = self.fed.topology.parties["bank"]
            if bank.address != address:
                if channel is not None:
                    channel.close()
                address = bank.address
                channel = dial(address, tls, expect="bank")
            assert channel is not None
            stub = party_pb2_grpc.PartyServiceStub(channel)
            request = party_pb2.PredictRequest(
                model_id=self.model, ids=[self.ids[rng.integers(len(self.ids))]]
            )
            begun = time.monotonic()
            try:
                reply = stub.Predict(request, timeout=self.args.score_deadline)
                outcome = "answered" if not reply.results[0].error else "id error"
            except grpc.RpcError as exc:
                code = exc.code()
                outcome = "refused" if code == grpc.StatusCode.RESOURCE_EXHAUSTED else code.name
            self.record.call(outcome, time.monotonic() - begun)
        if channel is not None:
            channel.close()

    def sampler(self) -> None:
        """Resident memory of each daemon's processes, every second."""
        topology = self.fed.topology
        daemons = {"coordinator": topology.daemon("coordinator"), **topology.parties}
        while not self.halt.wait(1.0):
            for name, daemon in daemons.items():
                self.record.rss(name, rss_bytes(members(daemon)))

    # --- the run ----------------------------------------------------------------------

    @property
    def fed(self) -> LocalProcesses:
        """The running federation."""
        if self._fed is None:
            raise RuntimeError("the soak's federation is not running")
        return self._fed

    def run(self) -> dict:
        datasets = {party: {"data": table} for party, table in self.tables.items()}
        grace = ("--party-grace", str(self.args.grace))
        with launched(datasets, self.workdir, coordinator_args=grace) as fed:
            self._fed = fed
            return self.load()

    def load(self) -> dict:
        a = self.args
        self.began = time.monotonic()
        loops = [self.trainer, self.killer] if a.kill_every > 0 else [self.trainer]
        loops += [self.over_limit] if a.over_limit_every > 0 else []
        submitters = [threading.Thread(target=f, daemon=True) for f in loops]
        scorers = [
            threading.Thread(target=self.scorer, args=(i,), daemon=True) for i in range(a.clients)
        ]
        background = [
            threading.Thread(target=f, daemon=True) for f in (self.operator, self.sampler)
        ]
        for t in [*submitters, *scorers, *background]:
            t.start()
        try:
            self.stop.wait(a.minutes * 60)
        finally:
            self.stop.set()
            self.drain(submitters)
            self.halt.set()
            for t in background:
                t.join(60)
            stopped_left = self.shut_down()
        return summary(self.record, self.args, time.monotonic() - self.began, stopped_left)

    def drain(self, submitters: list[threading.Thread]) -> None:
        """Let the jobs still running end (the operator still resumes them)."""
        deadline = time.monotonic() + self.args.drain_minutes * 60
        while time.monotonic() < deadline:
            with self.record.lock:
                open_jobs = [j for j in self.record.jobs.values() if j.state not in TERMINAL]
            if not open_jobs and not any(t.is_alive() for t in submitters):
                return
            time.sleep(1.0)

    def shut_down(self) -> list[int]:
        """Stop every daemon (SIGTERM); the processes of their sessions alive 10 s later."""
        sessions = [d.pid for d in self.fed.topology.daemons.values()]
        self.fed.topology.stop()
        time.sleep(LEFTOVER_WAIT_S)
        return sorted(p for sid in sessions for p in session_members(sid))


def _widths(text: str) -> list[int]:
    return [int(w) for w in text.split(",") if w.strip()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=60.0, help="load time (default 60)")
    p.add_argument("--drain-minutes", type=float, default=10.0, help="for open jobs after")
    p.add_argument("--rows", type=int, default=30_000)
    p.add_argument("--key-bits", type=int, default=512, help="blindfl's (test keys below 2048)")
    p.add_argument("--split-epochs", type=int, default=10)
    p.add_argument("--blindfl-epochs", type=int, default=2)
    p.add_argument("--clients", type=int, default=200, help="online scoring clients")
    p.add_argument("--think-ms", type=float, default=1000.0, help="mean pause between calls")
    p.add_argument("--score-deadline", type=float, default=10.0, help="seconds per call")
    p.add_argument("--kill-every", type=float, default=240.0, help="mean seconds; 0: none")
    p.add_argument("--over-limit-every", type=float, default=600.0, help="seconds; 0: none")
    p.add_argument("--over-limit-hidden", type=_widths, default=[65536, 65536])
    p.add_argument("--grace", type=float, default=10.0, help="coordinator's --party-grace")
    p.add_argument("--seed", type=int, default=0, help="which party is killed when")
    p.add_argument("--workdir", help="keep the federation's files here (default: temporary)")
    p.add_argument("--json", metavar="FILE", help="also write everything as JSON to FILE")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="vfl-soak-") as tmp:
        workdir = Path(args.workdir).resolve() if args.workdir else Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        summary = Soak(args, workdir).run()
    print(table(summary))
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))
    return 0 if summary["jobs_lost"] == 0 and summary["leftover_processes"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
