"""`GetJobReport` and `vfl report` against a real coordinator and parties (gRPC servers
on OS-chosen ports in this process; `vfl report` as a subprocess)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from vfl.contract.spec import TableSource
from vfl.coordinator.client import CoordinatorClient
from vfl.coordinator.server import create_coordinator_server
from vfl.party.config import PartyConfig
from vfl.party.server import create_party_server

from tests.support.data import FATE
from tests.support.jobs import wait

pytestmark = pytest.mark.grpc

VFL = [sys.executable, "-m", "vfl.cli.main"]
# CELU, and a 20 ms emulated round trip so that the parties report many rounds
CELU_JOB = """
job: curves
parties:
  - {id: bank, role: active, data: {dataset: breast}}
  - {id: shop, role: passive, data: {dataset: breast}}
local_updates: {mode: celu, workset: 3, reuse: 3, schedule: sync}
train: {epochs: 4, batch_size: 32}
validation: {every: 10}
network: {bandwidth_mbps: 100, rtt_ms: 20}
"""


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A coordinator, bank and shop, and a CELU job that SUCCEEDED on them."""
    tmp = tmp_path_factory.mktemp("report")
    coord = create_coordinator_server(str(tmp / "jobs.sqlite"), "127.0.0.1:0")
    address = f"127.0.0.1:{coord.port}"
    guest = TableSource(path=str(FATE / "breast_hetero_guest.csv"), label="y")
    host = TableSource(path=str(FATE / "breast_hetero_host.csv"))
    bank = create_party_server(
        PartyConfig("bank", "127.0.0.1:0", address, datasets={"breast": guest})
    )
    shop = create_party_server(
        PartyConfig("shop", "127.0.0.1:0", address, datasets={"breast": host})
    )
    client = CoordinatorClient(address)
    job_id = client.submit(CELU_JOB)
    assert wait(client, job_id).state == "SUCCEEDED"
    yield client, address, job_id
    client.close()
    for server in (bank, shop, coord):
        server.stop(0)


def test_report_has_every_partys_rounds_with_rising_counters(finished):
    client, _, job_id = finished

    report = client.job_report(job_id)

    assert report.job.job_id == job_id and "celu" in report.spec_yaml
    by_party = {p: [r for r in report.rounds if r.party_id == p] for p in ("bank", "shop")}
    for party, points in by_party.items():
        assert len(points) >= 3, party
        assert points[-1].round == report.result.rounds  # a last round is always sent
        assert [r.bytes_sent for r in points] == sorted(r.bytes_sent for r in points)
        assert points[-1].bytes_sent <= report.result.parties[party].bytes_sent  # + validation
        assert points[-1].local_updates == report.result.parties[party].local_updates > 0
    assert all(r.HasField("loss") for r in by_party["bank"])
    assert not any(r.HasField("loss") for r in by_party["shop"])
    seconds = [r.seconds for r in report.rounds]
    assert seconds == sorted(seconds) and 0 < seconds[0]
    assert [v.round for v in report.validations][:2] == [10, 20]
    assert all("auc" in v.metrics for v in report.validations)


def test_report_of_an_unknown_job_is_not_found(finished):
    client, _, _ = finished
    with pytest.raises(grpc.RpcError) as err:
        client.job_report("no-such-job")
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    assert "vfl jobs" in (err.value.details() or "")


def test_vfl_report_writes_pngs_and_one_self_contained_page(finished, tmp_path: Path):
    _, address, job_id = finished
    out = tmp_path / "out"

    done = subprocess.run(
        [*VFL, "report", job_id, "--out", str(out), "--coordinator", address],
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(out / "report.html")
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert pngs == sorted(
        [
            "loss_by_round.png",
            "loss_by_seconds.png",
            "validation_by_round.png",
            "validation_by_seconds.png",
            "bytes_per_round.png",
            "local_updates_per_round.png",
            "gains.png",  # a binary task's evaluation
            "lift_by_band.png",
            "calibration.png",
        ]
    )
    assert all((out / p).read_bytes().startswith(b"\x89PNG\r\n\x1a\n") for p in pngs)
    page = (out / "report.html").read_text()
    assert page.count('src="data:image/png;base64,') == len(pngs)
    # nothing fetched: no src/href to anywhere, no script
    assert not re.search(r"(src|href)=\"(?!data:)", page) and "<script" not in page
    for text in (job_id, "SUCCEEDED", "bank", "shop", "passive", "local_updates", "auc"):
        assert text in page
    assert "Lift and gains" in page and "Calibration" in page


def test_vfl_report_of_an_unknown_job_says_how_to_find_one(finished, tmp_path: Path):
    _, address, _ = finished
    done = subprocess.run(
        [*VFL, "report", "nope", "--out", str(tmp_path), "--coordinator", address],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "no job 'nope'" in done.stderr and "vfl jobs" in done.stderr
    assert not list(tmp_path.iterdir())
