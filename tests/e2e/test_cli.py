"""The `vfl` CLI as subprocesses on local processes: demo, run, their errors, Ctrl-C.

(`vfl` against daemons started by hand: tests/e2e/test_cli_daemons.py.)
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from vfl.local import LocalTopology
from vfl.rpc import COORDINATOR_ID
from vfl.secure.pki.federation import local_federation

from tests.support.cli import REPO, VFL, vfl, write_job
from tests.support.data import FATE, shared_data

pytestmark = pytest.mark.subprocess


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


# slow: 30 s for the demo's --json form; the demo itself (README's first command) runs in
# the default tier (test_demo_shows_the_stages_the_baseline_the_wire_and_scores)
@pytest.mark.slow
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
train: {{epochs: 6, batch_size: 64, lr: 0.05}}  # 60 rounds; r2 0.977 in-process
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
    assert out.returncode == 2  # the job FAILED on its input: a party refused it
    result = json.loads(out.stdout)
    assert result["state"] == "FAILED" and "its file does not exist" in result["reason"]
    assert "nope.csv" not in result["reason"]
    # the run's folder is gone; the shop's log said what it was before it went
    assert _runs(tmp_path) == []
    assert "party-shop" in out.stderr and "nope.csv' does not exist" in out.stderr


def test_a_partys_data_error_reaches_the_job_without_its_paths_or_columns(tmp_path) -> None:
    # Prepare: the shop's table, in a private folder, has a NaN in one column, and the
    # shop takes its features as they are (preprocess: none)
    rows = (FATE / "breast_hetero_host.csv").read_text().splitlines()
    column = rows[0].split(",")[3]
    cells = rows[1].split(",")
    cells[3] = "nan"
    table = tmp_path / "private" / "shop_customers.csv"
    table.parent.mkdir()
    table.write_text("\n".join([rows[0], ",".join(cells), *rows[2:]]) + "\n")
    job = write_job(tmp_path / "job.yaml")
    job.write_text(
        job.read_text().replace(f"{FATE}/breast_hetero_host.csv", f"{table}, preprocess: none")
    )
    # Execute
    out = vfl("run", str(job), "--json", "--workdir", str(tmp_path / "run"))
    # Assert: the reason names the party and the problem (exit code 2: the input is wrong);
    # the shop's own log has it all
    assert out.returncode == 2, out.stderr
    reason = json.loads(out.stdout)["reason"]
    assert "party 'shop'" in reason and "NaN or infinite" in reason
    assert "details in the log of party 'shop'" in reason
    assert "private" not in reason and "shop_customers" not in reason and column not in reason
    log = (tmp_path / "run" / "party-shop.log").read_text()
    assert str(table) in log and f"'{column}'" in log


def test_a_relative_workdir_is_the_folder_the_command_ran_in(tmp_path) -> None:
    # Prepare: `vfl run job.yaml --workdir wd`, as typed in a shell, from the job's folder
    write_job(tmp_path / "job.yaml", epochs=1)
    # Execute
    out = subprocess.run(
        [*VFL, "run", "job.yaml", "--json", "--workdir", "wd"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    # Assert: the run went through, its files in ./wd (not ./wd/wd)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["state"] == "SUCCEEDED"
    assert (tmp_path / "wd" / "tls" / "ca.crt").is_file()
    assert (tmp_path / "wd" / "coordinator.log").is_file() and not (tmp_path / "wd" / "wd").exists()


def test_a_topology_in_a_relative_folder_starts_its_daemons_with_tls(tmp_path, monkeypatch) -> None:
    # Prepare: a relative folder and CA, as `vfl.local.LocalTopology` may be given them
    monkeypatch.chdir(tmp_path)
    Path("wd").mkdir()
    tls = local_federation(Path("wd") / "tls", [COORDINATOR_ID])
    topology = LocalTopology(Path("wd"), tls_dir=tls)
    try:
        # Execute: its daemons run in that folder
        address = topology.start_coordinator()
    finally:
        topology.stop()
    # Assert: the coordinator found its certificate (else it exits: "wd/tls/ca.crt is missing")
    assert address.startswith("127.0.0.1:")


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


@pytest.mark.slow
def test_a_parquet_party_trains_as_its_csv(tmp_path) -> None:
    """The shop's rows as Parquet (written by pyarrow from its CSV): the same job, the
    same validation AUC. Slow tier: the reader's Parquet and CSV give the same table
    (tests/party/tables/test_reader.py), and a job reads Parquet end to end in the
    default tier through its SQL snapshots (tests/e2e/test_sql_source.py)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    host = FATE / "breast_hetero_host.csv"
    ids = pacsv.ConvertOptions(column_types={"id": pa.string()})
    pq.write_table(pacsv.read_csv(host, convert_options=ids), tmp_path / "host.parquet")
    job = write_job(tmp_path / "csv.yaml")
    job.write_text(job.read_text() + "protocol: split\n")
    parquet = tmp_path / "parquet.yaml"
    parquet.write_text(
        job.read_text().replace(f"path: {host}", f"path: {tmp_path}/host.parquet, format: parquet")
    )
    results = []
    for spec in (job, parquet):
        out = vfl("run", str(spec), "--json")
        assert out.returncode == 0, out.stderr
        results.append(json.loads(out.stdout))
    assert "parquet" in parquet.read_text() and results[0]["metrics"]["auc"] >= 0.97
    assert results[1]["metrics"]["auc"] == results[0]["metrics"]["auc"]
