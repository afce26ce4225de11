"""The `vfl` CLI as subprocesses against daemons started by hand: submit, watch, status,
jobs and cancel; a second coordinator on one database; an unreachable coordinator;
Ctrl-C while watching, and a coordinator lost under a watch.

(`vfl demo` and `vfl run` on local processes: tests/e2e/test_cli.py.)
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from vfl.secure.pki.federation import local_federation

from tests.support.cli import REPO, VFL, vfl, write_job
from tests.support.data import FATE

pytestmark = pytest.mark.subprocess


def _start(args: list[str], tmp_path: Path, name: str) -> tuple[subprocess.Popen, int]:
    port_file = tmp_path / f"{name}.port"
    proc = subprocess.Popen(
        [*VFL, *args, "--port-file", str(port_file)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / f"{name}.log", "w"),
    )
    deadline = time.monotonic() + 60
    while not port_file.exists() and time.monotonic() < deadline:
        assert proc.poll() is None, (tmp_path / f"{name}.log").read_text()
        time.sleep(0.05)
    return proc, int(port_file.read_text())


def _dataset_job(path: Path, epochs: int = 5) -> Path:
    """The breast job naming the dataset the parties' configs expose (`dataset: breast`)
    instead of files, as a job submitted to running daemons must."""
    text = write_job(path, epochs).read_text()
    guest, host = (
        f"path: {FATE}/breast_hetero_guest.csv, label: y",
        f"path: {FATE}/breast_hetero_host.csv",
    )
    path.write_text(text.replace(guest, "dataset: breast").replace(host, "dataset: breast"))
    return path


def test_by_hand_topology(tmp_path) -> None:
    # Prepare: a coordinator and two parties started as a user would
    coord, port = _start(
        ["coordinator", "serve", "--db", str(tmp_path / "jobs.sqlite"), "--listen", "127.0.0.1:0"],
        tmp_path,
        "coordinator",
    )
    procs = [coord]
    address = f"127.0.0.1:{port}"
    try:
        for pid, file, label in (
            ("bank", "breast_hetero_guest.csv", "\n    label: y"),
            ("shop", "breast_hetero_host.csv", ""),
        ):
            cfg = tmp_path / f"{pid}.yaml"
            cfg.write_text(
                f"party: {pid}\nlisten: 127.0.0.1:0\ncoordinator: {address}\n"
                f"datasets:\n  breast:\n    path: {FATE / file}{label}\n"
            )
            procs.append(_start(["party", "serve", "--config", str(cfg)], tmp_path, pid)[0])
        job = _dataset_job(tmp_path / "job.yaml")
        c = ["--coordinator", address]
        # Execute
        submitted = vfl("submit", str(job), *c)
        assert submitted.returncode == 0, submitted.stderr
        job_id = submitted.stdout.strip()
        watched = vfl("watch", job_id, "--json", *c)
        status = vfl("status", job_id, *c)
        listing = vfl("jobs", *c)
        unknown = vfl("status", "nope", *c)
        long_job = vfl("submit", str(write_job(tmp_path / "long.yaml", 5000)), *c)
        # Assert
        assert watched.returncode == 0 and json.loads(watched.stdout)["metrics"]["auc"] >= 0.98
        assert "SUCCEEDED" in status.stdout and job_id in listing.stdout
        assert unknown.returncode == 2 and "no job 'nope'" in unknown.stderr
        assert long_job.returncode == 2 and "dataset" in long_job.stderr
        # a job long enough to be running still when the cancel arrives
        running = _dataset_job(tmp_path / "running.yaml", epochs=500)
        cancel_id = vfl("submit", str(running), *c).stdout.strip()
        assert "CANCELLED" in vfl("cancel", cancel_id, *c).stdout
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for name, p in zip(("coordinator", "bank", "shop"), procs, strict=False):
            code = p.wait(timeout=30)
            assert code == 0, f"{name} exited {code}: {(tmp_path / f'{name}.log').read_text()}"


def test_a_second_coordinator_on_the_same_database_exits_2_at_once(tmp_path) -> None:
    db = tmp_path / "jobs.sqlite"
    serve = ["coordinator", "serve", "--db", str(db), "--listen", "127.0.0.1:0"]
    first, _ = _start(serve, tmp_path, "coordinator")
    try:
        second = vfl(*serve, timeout=60)
    finally:
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=30) == 0
    assert second.returncode == 2, second.stderr
    assert str(db) in second.stderr and "another coordinator" in second.stderr
    assert "--db" in second.stderr and "Traceback" not in second.stderr


def test_unreachable_coordinator_exits_3() -> None:
    out = vfl("jobs", "--coordinator", "127.0.0.1:1", timeout=120)
    assert out.returncode == 3


def _from_a_terminal(args: list[str], err: Path) -> subprocess.Popen:
    """`vfl ARGS` as typed in a terminal, so Ctrl-C (SIGINT) reaches it: a suite started
    in the background (`cmd &`) ignores SIGINT, and a child would inherit that."""
    return subprocess.Popen(
        [*VFL, *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=open(err, "w"),  # noqa: SIM115 - closed with the process
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _wait_for(text: str, err: Path, proc: subprocess.Popen, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while text not in err.read_text():
        assert proc.poll() is None and time.monotonic() < deadline, err.read_text()
        time.sleep(0.1)
    return err.read_text()


def _stop(proc: subprocess.Popen, sig: int) -> tuple[int, str]:
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=60)
    return proc.returncode, out


def test_ctrl_c_stops_watching_not_the_job_and_a_lost_coordinator_is_named(tmp_path) -> None:
    # Prepare: a TLS federation by hand and a long job
    fed = local_federation(tmp_path / "fed", ["coordinator", "admin", "bank", "shop"])
    tls = ["--tls", str(fed)]
    db = str(tmp_path / "jobs.sqlite")
    coord, port = _start(
        ["coordinator", "serve", "--db", db, "--listen", "127.0.0.1:0", *tls], tmp_path, "coord"
    )
    address = f"127.0.0.1:{port}"
    procs = [coord]
    c = ["--coordinator", address, *tls]
    try:
        for pid, file, label in (("bank", "guest", ", label: y"), ("shop", "host", "")):
            cfg = tmp_path / f"{pid}.yaml"
            cfg.write_text(
                f"party: {pid}\nlisten: 127.0.0.1:0\ncoordinator: {address}\ndatasets:\n"
                f"  breast: {{path: {FATE}/breast_hetero_{file}.csv{label}}}\n"
            )
            procs.append(_start(["party", "serve", "--config", str(cfg), *tls], tmp_path, pid)[0])
        job = _dataset_job(tmp_path / "job.yaml", 5000)
        # Execute: Ctrl-C on `vfl submit --wait` and on `vfl watch`; then the coordinator
        # dies under a third watch
        err = [tmp_path / f"cli{i}.err" for i in range(3)]
        submit = _from_a_terminal(["submit", str(job), "--wait", *c], err[0])
        job_id = _wait_for("TRAINING", err[0], submit).split()[1].rstrip(":")
        submitted = _stop(submit, signal.SIGINT)
        watch = _from_a_terminal(["watch", job_id, *c], err[1])
        _wait_for("TRAINING", err[1], watch)
        watched = _stop(watch, signal.SIGINT)
        status = vfl("status", job_id, *c)
        lost = _from_a_terminal(["watch", job_id, *c], err[2])
        _wait_for("TRAINING", err[2], lost)
        coord.kill()
        lost.wait(timeout=60)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(timeout=30)
    # Assert: the job ran on; each interruption and the loss said so
    keeps = f"stopped watching; job {job_id} keeps running (cancel it with `vfl cancel {job_id}`)"
    assert submitted[0] == 130 and keeps in err[0].read_text()
    assert watched[0] == 130 and keeps in err[1].read_text()
    assert "cancelled" not in err[0].read_text() + err[1].read_text()
    assert status.returncode == 0 and "TRAINING" in status.stdout
    message = err[2].read_text()
    assert lost.returncode == 3, message
    assert f"the connection to the coordinator at {address} was lost" in message
    assert "may still be running" in message and f"vfl watch {job_id}" in message
    assert "TLS" not in message and "certificate" not in message
