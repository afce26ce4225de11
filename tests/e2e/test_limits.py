"""A party's limits against real daemons (`vfl coordinator serve`, `vfl party serve`): a
job over a limit fails at PREPARE naming it while the daemon serves on, jobs beyond
max_concurrent_jobs wait QUEUED (across a coordinator restart), and the guard fails a
job whose data outgrows the party's memory while another job on it succeeds."""

from __future__ import annotations

import signal
import time

import pytest
import yaml
from vfl.party.limits import GB
from vfl.party.memory import tree_bytes

from tests.support.data import FATE, breast_datasets_config
from tests.support.processes import Daemons

pytestmark = pytest.mark.subprocess

DATASETS = breast_datasets_config()
ENDED = ("SUCCEEDED", "FAILED", "CANCELLED")


def spec(name: str, bank: str = "breast", epochs: int = 2, **extra) -> str:
    body = {
        "job": name,
        "parties": [
            {"id": "bank", "role": "active", "data": {"dataset": bank}},
            {"id": "shop", "role": "passive", "data": {"dataset": "breast"}},
        ],
        "train": {"epochs": epochs, "batch_size": 64},
        "validation": {"every": 10},
        **extra,
    }
    return yaml.safe_dump(body)


SLOW = {"network": {"bandwidth_mbps": 200, "rtt_ms": 60}}  # a few seconds a job


@pytest.fixture(scope="module")
def fed(tmp_path_factory: pytest.TempPathFactory):
    """A coordinator and shop; each test starts its own bank (`start_bank`)."""
    daemons = Daemons(tmp_path_factory.mktemp("limits"))
    daemons.start_coordinator()
    daemons.start_party("shop", DATASETS["shop"])
    yield daemons
    daemons.stop()


def start_bank(daemons: Daemons, limits: dict | None = None, datasets: dict | None = None):
    """(Re)start bank with these limits in its config; returns its process."""
    if "bank" in daemons.procs:
        proc = daemons.procs.pop("bank")
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    body = {
        "party": "bank",
        "coordinator": daemons.address,
        "datasets": {**DATASETS["bank"], **(datasets or {})},
    }
    if limits is not None:
        body["limits"] = limits
    (daemons.workdir / "bank.yaml").write_text(yaml.safe_dump(body))
    daemons.start_party("bank", {})
    return daemons.procs["bank"]


def write_spec(daemons: Daemons, name: str, text: str) -> str:
    path = daemons.workdir / f"{name}.yaml"
    path.write_text(text)
    return str(path)


def test_a_wide_hidden_layer_job_fails_at_once_naming_the_limit_and_the_next_succeeds(
    fed: Daemons,
) -> None:
    # Prepare: bank with the limits of this machine (none given)
    bank = start_bank(fed)
    wide = write_spec(fed, "wide", spec("wide", model={"top": {"hidden": [65536, 65536]}}))
    # Execute
    tick = time.monotonic()
    failed = fed.vfl("submit", "--wait", wide)
    seconds = time.monotonic() - tick
    # Assert: FAILED with exit 1, in seconds, naming the party, the limit and the fix
    assert failed.returncode == 1, failed.stdout + failed.stderr
    with fed.client() as client:
        view = next(client.get(j.job_id) for j in client.jobs() if j.name == "wide")
    assert view.state == "FAILED"
    took = view.updated_at - view.created_at
    print(f"wide job: FAILED {took:.2f} s after submission; `vfl submit --wait`: {seconds:.2f} s")
    assert took < 5.0, (seconds, view.reason)
    assert "party 'bank'" in view.reason and "max_parameters" in view.reason
    assert "model.top.hidden" in view.reason
    assert str(fed.workdir) not in view.reason
    # the daemon serves on: the next job succeeds on the same process
    ok = fed.vfl("submit", "--wait", write_spec(fed, "next", spec("next")))
    assert ok.returncode == 0, ok.stdout + ok.stderr + fed.logs()
    assert bank.poll() is None


def test_jobs_beyond_max_concurrent_jobs_wait_queued_across_a_coordinator_restart(
    fed: Daemons,
) -> None:
    # Prepare: bank takes one job at a time
    start_bank(fed, {"max_concurrent_jobs": 1})
    with fed.client() as client:
        first = client.submit(spec("first", epochs=4, **SLOW))
        fed.wait(first, lambda v: v.state != "SUBMITTED")  # bank's one slot is taken
        second = client.submit(spec("second"))
    # Execute: the second waits QUEUED while the first runs
    queued = fed.wait(second, lambda v: v.state in ("QUEUED", *ENDED))
    assert queued.state == "QUEUED", queued.reason
    assert "party 'bank'" in queued.reason and "max_concurrent_jobs" in queued.reason
    listed = fed.vfl("jobs")
    assert any(second in line and "QUEUED" in line for line in listed.stdout.splitlines())
    with fed.client() as client:
        assert client.get(first).state not in ENDED
    # the queue is in the job store: a coordinator killed and started again keeps it
    port = int(fed.address.rsplit(":", 1)[1])
    fed.kill("coordinator")
    fed.start_coordinator(port)
    with fed.client() as client:
        assert client.get(second).state in ("QUEUED", "ALIGNING", "TRAINING", "SUCCEEDED")
    # Assert: both succeed, the second launched once the first had left bank
    done_first = fed.wait(first, lambda v: v.state in ENDED)
    done_second = fed.wait(second, lambda v: v.state in ENDED)
    assert done_first.state == "SUCCEEDED", done_first.reason
    assert done_second.state == "SUCCEEDED", done_second.reason
    assert done_second.result.started_at > done_first.result.started_at


def test_the_guard_fails_a_job_whose_data_outgrows_memory_others_succeed_then_and_after(
    fed: Daemons,
) -> None:
    # Prepare: a table whose text column holds far more than its cheap estimate says
    notes = fed.workdir / "notes.csv"
    with notes.open("w") as fh:
        fh.write("id,y,note\n")
        for i in range(150_000):
            fh.write(f"n{i},{i % 2},{i:08d}{'x' * 2000}\n")
    datasets = {"notes": {"path": str(notes), "label": "y"}}
    # what bank's process tree holds once a job has run (its worker processes started)
    start_bank(fed, datasets=datasets)
    warm = fed.vfl("submit", "--wait", write_spec(fed, "warm", spec("warm", epochs=1)))
    assert warm.returncode == 0, warm.stdout + warm.stderr
    held = tree_bytes(fed.procs["bank"].pid)
    bank = start_bank(fed, {"memory_gb": round((held + (200 << 20)) / GB, 3)}, datasets)
    with fed.client() as client:
        running = client.submit(spec("running", epochs=3, **SLOW))
        fed.wait(running, lambda v: v.state in ("TRAINING", *ENDED))
        # Execute: a job whose data outgrows bank's memory while the other trains
        big = client.submit(spec("big", bank="notes"))
    too_big = fed.wait(big, lambda v: v.state in ENDED, timeout=120)
    other = fed.wait(running, lambda v: v.state in ENDED)
    # Assert: the big job failed naming the party and the limit; the other succeeded
    assert too_big.state == "FAILED"
    assert "party 'bank'" in too_big.reason and "memory_gb" in too_big.reason, too_big.reason
    assert not too_big.result.refused  # a limit, not bad input: `vfl` exits 1
    assert other.state == "SUCCEEDED", other.reason + fed.logs()
    assert bank.poll() is None
    # Execute: a job after it; Assert: not judged by what the failed job held
    with fed.client() as client:
        after = fed.wait(client.submit(spec("after", epochs=1)), lambda v: v.state in ENDED)
    assert after.state == "SUCCEEDED", after.reason + fed.logs()
    deadline = time.monotonic() + 15  # its memory goes back (the guard's ticks)
    while tree_bytes(bank.pid) >= held + (100 << 20) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert tree_bytes(bank.pid) < held + (100 << 20), tree_bytes(bank.pid) - held


def test_max_rows_holds_against_the_rows_read_when_the_estimate_says_few(
    fed: Daemons,
) -> None:
    # Prepare: breast's rows and more, 20,000 in all, behind a 1.5 MB first cell: the
    # estimate (the file's size over its first MiB's lines) says a few hundred rows
    guest = (FATE / "breast_hetero_guest.csv").read_text().splitlines()
    wide = fed.workdir / "wide.csv"
    with wide.open("w") as fh:
        fh.write(f"{guest[0]},note\n{guest[1]},{'n' * 1_500_000}\n")
        fh.writelines(f"{line},\n" for line in guest[2:])
        cells = guest[1].split(",", 1)[1]
        fh.writelines(f"x{i},{cells},\n" for i in range(20_000 - len(guest) + 1))
    bank = start_bank(fed, {"max_rows": 1000}, {"wide": {"path": str(wide), "label": "y"}})
    # Execute
    failed = fed.vfl("submit", "--wait", write_spec(fed, "rows", spec("rows", bank="wide")))
    # Assert: FAILED at PREPARE (exit 1, a limit), naming the party, the rows read, the
    # limit and the fix; the daemon serves on
    assert failed.returncode == 1, failed.stdout + failed.stderr
    with fed.client() as client:
        view = next(client.get(j.job_id) for j in client.jobs() if j.name == "rows")
    assert view.state == "FAILED" and not view.result.refused
    assert "party 'bank'" in view.reason and "hold at least" in view.reason, view.reason
    assert "max_rows = 1,000" in view.reason and "limits.max_rows" in view.reason
    ok = fed.vfl("submit", "--wait", write_spec(fed, "fits", spec("fits")))
    assert ok.returncode == 0, ok.stdout + ok.stderr + fed.logs()
    assert bank.poll() is None
