"""A coordinator and parties as real gRPC servers on OS-chosen ports, in one process."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import grpc
import pytest
from vfl.contract.spec import TableSource
from vfl.coordinator.client import CoordinatorClient
from vfl.coordinator.server import create_coordinator_server
from vfl.party.config import PartyConfig
from vfl.party.server import create_party_server

from tests.support.data import FATE
from tests.support.jobs import job, wait

pytestmark = pytest.mark.grpc


@pytest.fixture(scope="module")
def wide_csv(tmp_path_factory) -> Path:
    """The breast guest table with 30,000 more columns: seconds to load, as a big table is."""
    rows = (FATE / "breast_hetero_guest.csv").read_text().splitlines()
    extra = 30_000
    path = tmp_path_factory.mktemp("wide") / "wide.csv"
    ones = "," + ",".join(["1"] * extra)
    header = rows[0] + "," + ",".join(f"w{i}" for i in range(extra))
    path.write_text("\n".join([header, *(r + ones for r in rows[1:])]) + "\n")
    return path


@pytest.fixture
def topology(request, tmp_path: Path, wide_csv: Path):
    """Coordinator, bank and shop; indirect parametrisation may set the coordinator's
    control timeout and party grace ({"control_timeout_s": 0.5})."""
    nan = tmp_path / "nan.csv"
    rows = (FATE / "breast_hetero_host.csv").read_text().splitlines()
    nan.write_text("\n".join([rows[0], rows[1].replace("0.449512", "nan"), *rows[2:]]))
    short = tmp_path / "short.csv"
    short.write_text("\n".join(rows[:-3]) + "\n")
    dup = tmp_path / "dup.csv"
    dup.write_text("\n".join([*rows, rows[5]]) + "\n")
    coord = create_coordinator_server(
        str(tmp_path / "jobs.sqlite"),
        "127.0.0.1:0",
        health_interval_s=0.5,
        **{"party_grace_s": 1.0, "control_timeout_s": 60.0, **getattr(request, "param", {})},
    )
    address = f"127.0.0.1:{coord.port}"
    bank = create_party_server(
        PartyConfig(
            "bank",
            "127.0.0.1:0",
            address,
            datasets={
                "breast": TableSource(path=str(FATE / "breast_hetero_guest.csv"), label="y"),
                "wide": TableSource(path=str(wide_csv), label="y"),
            },
        )
    )
    shop = create_party_server(
        PartyConfig(
            "shop",
            "127.0.0.1:0",
            address,
            datasets={
                "breast": TableSource(path=str(FATE / "breast_hetero_host.csv")),
                "nan": TableSource(path=str(nan), preprocess="none"),
                "short": TableSource(path=str(short)),
                "dup": TableSource(path=str(dup)),
            },
        )
    )
    client = CoordinatorClient(address)
    yield client, coord, bank, shop
    client.close()
    for server in (bank, shop, coord):
        server.stop(0)


def test_full_job_over_grpc(topology) -> None:
    client, *_ = topology
    view = wait(client, client.submit(job(epochs=5)))
    assert view.state == "SUCCEEDED", view.reason
    r = view.result
    assert r.metrics["auc"] >= 0.98 and r.rounds == 40
    assert r.bytes_sent == sum(p.bytes_sent for p in r.parties.values()) > 0
    assert [h.round for h in r.history] == [10, 20, 30, 40]
    assert [j.job_id for j in client.jobs()] == [view.job_id]
    assert r.intersection_size == 569 and r.psi_seconds >= 0


def test_a_party_still_loading_its_data_is_not_taken_for_lost(topology) -> None:
    # The monitor (grace 1 s) probes both parties while the bank loads its wide table;
    # the bank may not count as having lost the job.
    client, *_ = topology
    view = wait(client, client.submit(job(bank="wide", epochs=1)))
    assert view.state == "SUCCEEDED", view.reason


def test_a_job_cancelled_while_a_party_loads_is_dropped_once_loaded(topology) -> None:
    # The cancel's AbortJob reaches the bank before its table is loaded; the prepared job
    # (and its table) must not stay behind once the load finishes.
    client, _, bank, _ = topology
    job_id = client.submit(job(bank="wide", epochs=1))
    deadline = time.monotonic() + 30
    while job_id not in bank.daemon.running_jobs() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert client.cancel(job_id) == "CANCELLED"
    while job_id in bank.daemon.running_jobs() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert bank.daemon.running_jobs() == []
    assert client.get(job_id).state == "CANCELLED"


@pytest.mark.parametrize("topology", [{"control_timeout_s": 0.5}], indirect=True, ids=["0.5s"])
def test_loading_a_table_may_outlast_the_control_timeout(topology) -> None:
    # PrepareJob loads the table: its deadline is the job's timeout_s, not the 0.5 s
    # control deadline, which the wide table's load (seconds) would overrun.
    client, *_ = topology
    view = wait(client, client.submit(job(bank="wide", epochs=1)))
    assert view.state == "SUCCEEDED", view.reason


def test_partial_overlap_reports_the_intersection(topology) -> None:
    client, *_ = topology
    view = wait(client, client.submit(job(shop="short")))
    assert view.state == "SUCCEEDED" and view.result.intersection_size == 566


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        (job(shop="nan"), "NaN or infinite"),
        (job(shop="dup"), "duplicate"),
    ],
)
def test_bad_data_fails_the_job_with_its_reason_and_daemons_survive(
    topology, spec, fragment
) -> None:

    client, *_ = topology
    view = wait(client, client.submit(spec))
    assert view.state == "FAILED" and fragment in view.reason
    assert view.result.refused  # refused at PREPARE as bad input: the CLI exits 2
    assert wait(client, client.submit(job())).state == "SUCCEEDED"


def test_a_job_failing_for_bad_input_leaves_a_concurrent_job_alone(topology) -> None:
    client, *_ = topology
    good = client.submit(job(name="good", epochs=4))
    bad = client.submit(job(name="bad", shop="nan"))
    failed = wait(client, bad)
    assert failed.state == "FAILED" and "NaN or infinite" in failed.reason
    assert wait(client, good).state == "SUCCEEDED"


def test_bad_requests_get_status_codes(topology) -> None:
    client, *_ = topology
    with pytest.raises(grpc.RpcError) as err:
        client.get("no-such-job")
    assert err.value.code() == grpc.StatusCode.NOT_FOUND and "vfl jobs" in err.value.details()
    with pytest.raises(grpc.RpcError) as err:
        client.submit("job: [")
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as err:
        client.submit(
            job().replace("passive, data: {dataset: breast}", "passive, data: {path: /etc/passwd}")
        )
    assert "data: {dataset: NAME}" in err.value.details()
    # a dataset its registered party does not expose: refused at submit, naming the fix
    with pytest.raises(grpc.RpcError) as err:
        client.submit(job(shop="missing"))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "party 'shop' exposes no dataset 'missing' (it exposes: " in err.value.details()


@pytest.mark.parametrize("topology", [{"control_timeout_s": 0.5}], indirect=True, ids=["0.5s"])
def test_unreachable_party_fails_the_job(topology) -> None:
    # Launching waits up to the control timeout for a party's channel to connect; the
    # short one here says "not reachable" before the health monitor's grace ends.
    client, _, _, shop = topology
    shop.stop(0)
    view = wait(client, client.submit(job()))
    assert view.state == "FAILED" and "'shop'" in view.reason and "not reachable" in view.reason


def test_cancel_stops_a_running_job(topology) -> None:
    client, _, bank, shop = topology
    job_id = client.submit(job(epochs=2000))
    deadline = time.monotonic() + 30
    while client.get(job_id).state != "TRAINING" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert client.cancel(job_id) == "CANCELLED"
    deadline = time.monotonic() + 10
    while (bank.daemon.running_jobs() or shop.daemon.running_jobs()) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.05)
    assert bank.daemon.running_jobs() == [] and shop.daemon.running_jobs() == []
    assert client.get(job_id).state == "CANCELLED"


def test_job_state_survives_a_coordinator_restart(topology, tmp_path) -> None:
    client, coord, *_ = topology
    job_id = client.submit(job())
    view = wait(client, job_id)
    coord.stop(0)
    again = create_coordinator_server(str(tmp_path / "jobs.sqlite"), "127.0.0.1:0")
    try:
        with CoordinatorClient(f"127.0.0.1:{again.port}") as c2:
            assert c2.get(job_id).state == view.state == "SUCCEEDED"
            assert c2.get(job_id).result.metrics == view.result.metrics
    finally:
        again.stop(0)


def test_a_party_that_dies_mid_job_pauses_it_with_a_reason(topology) -> None:
    client, _, _, shop = topology
    job_id = client.submit(job(epochs=5000))
    deadline = time.monotonic() + 30
    while client.get(job_id).state != "TRAINING" and time.monotonic() < deadline:
        time.sleep(0.05)
    shop.stop(0)
    view = wait(client, job_id, timeout=60, until=("PAUSED", "SUCCEEDED", "FAILED", "CANCELLED"))
    assert view.state == "PAUSED" and "'shop'" in view.reason and "vfl resume" in view.reason


def test_a_party_stopping_mid_job_pauses_it_even_while_its_server_still_answers(
    topology,
) -> None:
    # The first steps of `PartyServer.stop`, held open: shop ends its job because it
    # stops, while its server still answers bank's envelopes (a race in a plain stop).
    client, _, bank, shop = topology
    job_id = client.submit(job(epochs=5000))
    deadline = time.monotonic() + 30
    while client.get(job_id).state != "TRAINING" and time.monotonic() < deadline:
        time.sleep(0.05)
    shop.daemon.stopping()
    shop.daemon.abort(job_id, "party daemon shutting down")
    time.sleep(1.0)  # bank pushes to the stopping daemon meanwhile: refused, retried
    assert client.get(job_id).state == "TRAINING" and job_id in bank.daemon.running_jobs()
    shop.stop(0)
    view = wait(client, job_id, timeout=60, until=("PAUSED", "SUCCEEDED", "FAILED", "CANCELLED"))
    assert view.state == "PAUSED" and "'shop'" in view.reason, view.reason


@pytest.mark.parametrize("topology", [{"party_grace_s": 10.0}], indirect=True, ids=["10s"])
def test_a_job_submitted_right_after_a_party_restart_runs(topology) -> None:
    # A party dies mid-job and the coordinator's probes fail: its cached channel to the
    # party reconnects with back-off (attempts about 1, 2.6, 5.2 and 9.3 s after the
    # first failure). The party is back 6.5 s later on the same port, registers and
    # answers; a job submitted at once must wait for the channel to reconnect, not call
    # the party unreachable. (The health monitor's grace is the default 10 s here.)
    client, _, _, shop = topology
    config = dataclasses.replace(shop.daemon.config, listen=f"127.0.0.1:{shop.port}")
    current = shop
    try:
        for attempt in range(2):
            running = client.submit(job(name=f"dies-{attempt}", epochs=5000))
            deadline = time.monotonic() + 30
            while client.get(running).state != "TRAINING" and time.monotonic() < deadline:
                time.sleep(0.05)
            current.stop(0)
            time.sleep(6.5)
            current = create_party_server(config)
            view = wait(client, client.submit(job(name=f"after-restart-{attempt}", epochs=1)))
            assert view.state == "SUCCEEDED", f"attempt {attempt}: {view.reason}"
    finally:
        current.stop(0)


@pytest.fixture
def kept(tmp_path: Path, wide_csv: Path):
    """Coordinator (grace 1 s), bank (breast and the wide table) and shop, each party
    keeping its checkpoints in a state directory; `restart(name)` starts it again on its
    port with its state."""
    coord = create_coordinator_server(
        str(tmp_path / "jobs.sqlite"), "127.0.0.1:0", health_interval_s=0.5, party_grace_s=1.0
    )
    address = f"127.0.0.1:{coord.port}"
    tables = {
        "bank": {
            "breast": TableSource(path=str(FATE / "breast_hetero_guest.csv"), label="y"),
            "wide": TableSource(path=str(wide_csv), label="y"),
        },
        "shop": {"breast": TableSource(path=str(FATE / "breast_hetero_host.csv"))},
    }
    servers = {
        p: create_party_server(
            PartyConfig(p, "127.0.0.1:0", address, datasets=d, state_dir=tmp_path / f"{p}-state")
        )
        for p, d in tables.items()
    }

    def restart(name: str) -> None:
        old = servers[name]
        config = dataclasses.replace(old.daemon.config, listen=f"127.0.0.1:{old.port}")
        servers[name] = create_party_server(config)

    client = CoordinatorClient(address)
    yield client, servers, restart
    client.close()
    for server in (*servers.values(), coord):
        server.stop(0)


def test_a_resumed_job_that_loses_a_party_while_it_launches_pauses_again(kept) -> None:
    # Prepare: a job paused with its checkpoints kept, its shop back
    client, servers, restart = kept
    job_id = client.submit(job(bank="wide", epochs=5))  # 40 rounds: stopped after 16
    view = wait(client, job_id, until=("TRAINING",))
    deadline = time.monotonic() + 60
    while client.get(job_id).result.checkpoint_round < 10 and time.monotonic() < deadline:
        time.sleep(0.05)
    servers["shop"].stop(0)
    view = wait(client, job_id, until=("PAUSED", "FAILED", "SUCCEEDED"))
    assert view.state == "PAUSED", view.reason
    restart("shop")
    # Execute: resume; the shop is lost again while the bank still loads its wide table
    assert client.resume(job_id)[0] == "ALIGNING"
    while job_id not in servers["bank"].daemon.running_jobs() and time.monotonic() < deadline:
        time.sleep(0.01)
    servers["shop"].stop(0)
    # Assert: paused again with its checkpoints, not failed; once back, it resumes to its end
    view = wait(client, job_id, until=("PAUSED", "FAILED", "SUCCEEDED"))
    assert view.state == "PAUSED", view.reason
    restart("shop")
    resume_once_loaded(client, job_id)
    view = wait(client, job_id, timeout=180)
    assert view.state == "SUCCEEDED", view.reason
    assert view.result.resumed_from >= 10


def resume_once_loaded(client: CoordinatorClient, job_id: str, timeout: float = 60) -> None:
    """Resume `job_id` as its refusal asks: again once the party still loading the table of
    the launch it lost has loaded it (slow on a busy machine)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            client.resume(job_id)
            return
        except grpc.RpcError as exc:
            if "loading still" not in (exc.details() or "") or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
