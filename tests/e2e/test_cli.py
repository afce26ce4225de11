"""The `vfl` CLI as subprocesses: run, demo, the by-hand topology, errors, Ctrl-C."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from vfl.secure.pki.federation import local_federation

from tests.support.data import FATE, shared_data

pytestmark = pytest.mark.subprocess

VFL = [sys.executable, "-m", "vfl.cli.main"]
REPO = Path(__file__).resolve().parents[2]


def vfl(*args: str, timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*VFL, *args], capture_output=True, text=True, timeout=timeout, cwd=REPO, **kw
    )


def write_job(path: Path, epochs: int = 5) -> Path:
    path.write_text(f"""
job: breast
parties:
  - {{id: bank, role: active, data: {{path: {FATE}/breast_hetero_guest.csv, label: y}}}}
  - {{id: shop, role: passive, data: {{path: {FATE}/breast_hetero_host.csv}}}}
train: {{epochs: {epochs}, batch_size: 64}}
validation: {{every: 10}}
""")
    return path


def check_secure_demo(result: dict) -> None:
    """The secure demo's JSON: the blindfl job, the split baseline, the wire audit's
    summary (no plaintext found, only allowed kinds) and online scores."""
    assert result["state"] == "SUCCEEDED" and result["metrics"]["auc"] >= 0.97
    for key in ("job", "rounds", "history", "bytes_sent", "seconds", "wall_seconds"):
        assert key in result
    assert result["baseline"]["state"] == "SUCCEEDED"
    assert result["baseline"]["metrics"]["auc"] >= 0.97
    wire = result["wire"]
    assert set(wire["directions"]) == {"bank->shop", "shop->bank"}
    kinds = set().union(*(d["kinds"] for d in wire["directions"].values()))
    assert {"public_key", "ciphertexts", "ec_points"} <= kinds and "tensor" not in kinds
    assert wire["disallowed_kinds"] == [] and wire["leaks"] == {"feature": 0, "label": 0}
    assert wire["patterns"]["feature"] > 10_000 and wire["patterns"]["label"] > 100
    sent = sum(d["bytes"] for d in wire["directions"].values())
    assert sent == result["bytes_sent"]  # the audit saw every byte the parties counted
    scores = result["scores"]
    assert len(scores) == 3 and {s["label"] for s in scores} == {"0", "1"}
    assert all(0.0 <= s["score"] <= 1.0 and s["class"] in ("0", "1") for s in scores)


def test_demo_json_trains_securely_with_test_keys() -> None:
    out = vfl("demo", "--json", "--test-keys")
    assert out.returncode == 0, out.stderr
    assert "warning: --test-keys: 512-bit Paillier keys, not secure" in out.stderr
    check_secure_demo(json.loads(out.stdout))


@pytest.mark.slow
def test_demo_default_2048_bits_under_90_seconds() -> None:
    """The README's first command: 2048-bit keys, 2 cores (measured wall time)."""
    out = vfl("demo", "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    check_secure_demo(result)
    assert result["wall_seconds"] < 90


def test_demo_shows_the_stages_the_baseline_the_wire_and_scores() -> None:
    out = vfl("demo", "--test-keys")
    assert out.returncode == 0, out.stderr
    for stage in ("ALIGNING - aligning rows (private set intersection)", "KEYING - generating"):
        assert stage in out.stderr  # live progress, before training
    lines = out.stdout.splitlines()
    assert re.search(
        r"^validation auc: blindfl 0\.9\d+ \(secure, .* split 0\.9\d+", out.stdout, re.M
    )
    assert re.search(r"^  bank->shop: \d+ envelopes, [\d.]+ MB \(ciphertexts", out.stdout, re.M)
    assert any(line.startswith("  no feature value, label or plaintext tensor") for line in lines)
    assert (
        sum(bool(re.match(r"  id \d+: score=[\d.]+ class=[01] \(label [01]\)", x)) for x in lines)
        == 3
    )
    assert re.search(r"^wall time: [\d.]+ s$", out.stdout, re.M)


def test_demo_split_is_the_fast_path() -> None:
    out = vfl("demo", "--protocol", "split")
    assert out.returncode == 0, out.stderr
    assert "ALIGNING - aligning rows" in out.stderr and "KEYING" not in out.stderr
    assert "auc=" in out.stdout and "wire" not in out.stdout and "wall time:" in out.stdout


def _temp(tmp_path: Path) -> dict[str, str]:
    """An environment whose temporary folders go to tmp_path/tmp (to see what stays)."""
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return {**os.environ, "TMPDIR": str(tmp_path / "tmp")}


def _runs(tmp_path: Path) -> list[Path]:
    """The temporary folders of `vfl run` in the environment of `_temp`."""
    return list((tmp_path / "tmp").glob("vfl-run-*"))


def test_run_json_breast(tmp_path) -> None:
    out = vfl("run", str(write_job(tmp_path / "job.yaml")), "--json", env=_temp(tmp_path))
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["metrics"]["auc"] >= 0.98 and result["rounds"] == 40
    assert result["history"][-1]["round"] == 40 and result["history"][-1]["seconds"] > 0
    assert _runs(tmp_path) == []  # the run's folder, its CA key with it, is gone


def test_run_three_party_motor(tmp_path) -> None:
    fate = shared_data("fate")
    job = tmp_path / "motor.yaml"
    job.write_text(f"""
job: motor
parties:
  - {{id: plant, role: active, data: {{path: {fate}/motor_hetero_guest.csv, id: idx,
      label: motor_speed}}}}
  - {{id: s1, role: passive, data: {{path: {fate}/motor_hetero_host_1.csv, id: idx}}}}
  - {{id: s2, role: passive, data: {{path: {fate}/motor_hetero_host_2.csv, id: idx}}}}
model: {{source: {{out_dim: 8}}, top: {{hidden: [16], task: regression}}}}
train: {{epochs: 10, batch_size: 32}}
validation: {{every: 1000}}
""")
    out = vfl("run", str(job), "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["metrics"]["r2"] >= 0.85 and "rmse" in result["metrics"]


@pytest.mark.parametrize(
    ("content", "fragment"),
    [("job: [", "not valid YAML"), ("parties: []\nfoo: 1", "unknown field(s) 'foo'")],
)
def test_run_bad_spec_exits_2_with_the_reason(tmp_path, content, fragment) -> None:
    (tmp_path / "job.yaml").write_text(content)
    out = vfl("run", str(tmp_path / "job.yaml"))
    assert out.returncode == 2 and fragment in out.stderr


def test_run_missing_file_fails_the_job(tmp_path) -> None:
    job = write_job(tmp_path / "job.yaml")
    job.write_text(job.read_text().replace("breast_hetero_host.csv", "nope.csv"))
    out = vfl("run", str(job), "--json", env=_temp(tmp_path))
    assert out.returncode == 1
    result = json.loads(out.stdout)
    assert result["state"] == "FAILED" and "its file does not exist" in result["reason"]
    assert "nope.csv" not in result["reason"]
    # the run's folder is gone; the shop's log said what it was before it went
    assert _runs(tmp_path) == []
    assert "party-shop" in out.stderr and "nope.csv' does not exist" in out.stderr


def test_a_partys_data_error_reaches_the_job_without_its_paths_or_columns(tmp_path) -> None:
    # Prepare: the shop's table, in a private folder, has a NaN in one column
    rows = (FATE / "breast_hetero_host.csv").read_text().splitlines()
    column = rows[0].split(",")[3]
    cells = rows[1].split(",")
    cells[3] = "nan"
    table = tmp_path / "private" / "shop_customers.csv"
    table.parent.mkdir()
    table.write_text("\n".join([rows[0], ",".join(cells), *rows[2:]]) + "\n")
    job = write_job(tmp_path / "job.yaml")
    job.write_text(job.read_text().replace(f"{FATE}/breast_hetero_host.csv", str(table)))
    # Execute
    out = vfl("run", str(job), "--json", "--workdir", str(tmp_path / "run"))
    # Assert: the reason names the party and the problem; the shop's own log has it all
    assert out.returncode == 1, out.stderr
    reason = json.loads(out.stdout)["reason"]
    assert "party 'shop'" in reason and "NaN or infinite" in reason
    assert "details in the log of party 'shop'" in reason
    assert "private" not in reason and "shop_customers" not in reason and column not in reason
    log = (tmp_path / "run" / "party-shop.log").read_text()
    assert str(table) in log and f"'{column}'" in log


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
        job = tmp_path / "job.yaml"
        job.write_text(
            write_job(tmp_path / "j.yaml")
            .read_text()
            .replace(f"path: {FATE}/breast_hetero_guest.csv, label: y", "dataset: breast")
            .replace(f"path: {FATE}/breast_hetero_host.csv", "dataset: breast")
        )
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
        cancel_id = vfl("submit", str(job), *c).stdout.strip()
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


def test_ctrl_c_stops_every_process(tmp_path) -> None:
    workdir = tmp_path / "run"
    proc = subprocess.Popen(
        [*VFL, "run", str(write_job(tmp_path / "job.yaml", 5000)), "--workdir", str(workdir)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},  # SIGABRT dumps every thread's stack
        # Ctrl-C as from a terminal: a suite started in the background (`cmd &`) ignores
        # SIGINT, and a child would inherit that, so vfl run would never see it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and "round" not in _logs(workdir):
        time.sleep(0.1)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        _, err = proc.communicate(timeout=30)
        pytest.fail(f"vfl run still running 60 s after Ctrl-C; its threads:\n{err[-6000:]}")
    assert proc.returncode == 130 and "interrupted" in err
    pids = (
        [int(p) for p in (workdir / "pids").read_text().split()]
        if (workdir / "pids").exists()
        else []
    )
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert (workdir / "tls" / "ca.key").exists()  # a --workdir is the user's: it stays


def test_an_interrupted_run_removes_its_folder_and_processes(tmp_path) -> None:
    proc = subprocess.Popen(
        [*VFL, "run", str(write_job(tmp_path / "job.yaml", 5000))],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_temp(tmp_path),
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as from a terminal
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and "round" not in "".join(map(_logs, _runs(tmp_path))):
        time.sleep(0.1)
    [run] = _runs(tmp_path)
    pids = [int(p) for p in (run / "pids").read_text().split()]
    assert (run / "tls" / "ca.key").exists()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "interrupted" in err
    assert _runs(tmp_path) == []
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def _from_a_terminal(args: list[str], err: Path) -> subprocess.Popen:
    """`vfl ARGS` as typed in a terminal, so Ctrl-C (SIGINT) reaches it (see above)."""
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
        job = tmp_path / "job.yaml"
        job.write_text(
            write_job(tmp_path / "long.yaml", 5000)
            .read_text()
            .replace(f"path: {FATE}/breast_hetero_guest.csv, label: y", "dataset: breast")
            .replace(f"path: {FATE}/breast_hetero_host.csv", "dataset: breast")
        )
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


def _logs(workdir: Path) -> str:
    return "".join(p.read_text() for p in workdir.glob("*.log")) if workdir.exists() else ""


@pytest.mark.slow
def test_blindfl_a9a_at_2048_bits_matches_split(tmp_path) -> None:
    """The one slow test at full key size: a9a through `vfl run`, evaluated on a9a.t."""
    data = shared_data("a9a")

    def job(protocol: str) -> Path:
        path = tmp_path / f"{protocol}.yaml"
        path.write_text(f"""
job: a9a-{protocol}
parties:
  - {{id: bank, role: active, data: {{path: {data}/a9a.guest, test_path: {data}/a9a.t.guest,
      format: libsvm, label: y}}}}
  - {{id: shop, role: passive, data: {{path: {data}/a9a.host, test_path: {data}/a9a.t.host,
      format: libsvm}}}}
protocol: {protocol}
crypto: {{key_bits: 2048}}
model: {{source: {{out_dim: 1, lr: 1.0}}, top: {{hidden: [], task: binary}}}}
train: {{epochs: 2, batch_size: 256, lr: 0.1}}
validation: {{every: 1000}}
""")
        return path

    results = {}
    for protocol in ("split", "blindfl"):
        out = vfl("run", str(job(protocol)), "--json", timeout=1800)
        assert out.returncode == 0, out.stderr[-2000:]
        results[protocol] = json.loads(out.stdout)["metrics"]["auc"]
    assert results["blindfl"] >= 0.895
    assert abs(results["blindfl"] - results["split"]) <= 0.005
