"""A job submitted while its parties are still starting waits for them (QUEUED, with the
reason) instead of failing at once; one whose party never comes fails, naming it, once the
coordinator's `register_wait_s` has passed. Real gRPC servers in one process."""

from __future__ import annotations

from pathlib import Path

import pytest
from vfl.contract.spec import TableSource
from vfl.coordinator.client import CoordinatorClient
from vfl.coordinator.server import create_coordinator_server
from vfl.party.config import PartyConfig
from vfl.party.server import create_party_server

from tests.support.data import FATE
from tests.support.jobs import job, wait

pytestmark = pytest.mark.grpc


def _party(party_id: str, coordinator: str, table: str, label: str | None = None):
    source = TableSource(path=str(FATE / table), label=label)
    return create_party_server(
        PartyConfig(party_id, "127.0.0.1:0", coordinator, datasets={"breast": source})
    )


def test_a_job_submitted_before_its_parties_registered_waits_for_them(tmp_path: Path) -> None:
    # Prepare: a coordinator, and no party yet
    coord = create_coordinator_server(str(tmp_path / "jobs.sqlite"), "127.0.0.1:0")
    address = f"127.0.0.1:{coord.port}"
    servers = []
    try:
        with CoordinatorClient(address) as client:
            # Execute: submit, then start the parties
            job_id = client.submit(job(epochs=1))
            queued = wait(client, job_id, 10.0, until=("QUEUED", "FAILED"))
            servers.append(_party("bank", address, "breast_hetero_guest.csv", "y"))
            servers.append(_party("shop", address, "breast_hetero_host.csv"))
            view = wait(client, job_id)
        # Assert
        assert queued.state == "QUEUED", queued.reason
        assert "['bank', 'shop'] to register" in queued.reason
        assert view.state == "SUCCEEDED", view.reason
        assert view.result.intersection_size == 569
    finally:
        for server in (*servers, coord):
            server.stop(0)


def test_a_party_that_never_registers_fails_the_job_after_the_wait(tmp_path: Path) -> None:
    # Prepare: a coordinator that waits 2 s for registrations; only the bank comes
    coord = create_coordinator_server(
        str(tmp_path / "jobs.sqlite"), "127.0.0.1:0", register_wait_s=2.0
    )
    address = f"127.0.0.1:{coord.port}"
    bank = _party("bank", address, "breast_hetero_guest.csv", "y")
    try:
        with CoordinatorClient(address) as client:
            # Execute
            job_id = client.submit(job(epochs=1))
            queued = wait(client, job_id, 10.0, until=("QUEUED", "FAILED"))
            view = wait(client, job_id, 30.0)
        # Assert: it waited for the shop, then failed naming it and the wait
        assert queued.state == "QUEUED" and "['shop'] to register" in queued.reason
        assert view.state == "FAILED"
        assert "['shop'] never registered" in view.reason
        assert "waited 2 s" in view.reason
    finally:
        for server in (bank, coord):
            server.stop(0)
