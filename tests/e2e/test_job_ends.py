"""A job always ends, and a job that ends without success leaves no model part behind.
Real gRPC servers in one process, each party with its own state directory."""

from __future__ import annotations

from pathlib import Path

import pytest
from vfl.contract.spec import TableSource, parse_spec_text
from vfl.coordinator.client import CoordinatorClient
from vfl.coordinator.server import create_coordinator_server
from vfl.party.config import PartyConfig
from vfl.party.server import create_party_server

from tests.support.data import FATE
from tests.support.jobs import job, wait

pytestmark = pytest.mark.grpc


@pytest.fixture
def federation(tmp_path: Path):
    """A coordinator, and bank and shop keeping state; the bank's `tiny` dataset is the
    first 7 rows of breast (its one validation row holds one class)."""
    rows = (FATE / "breast_hetero_guest.csv").read_text().splitlines()
    tiny = tmp_path / "tiny.csv"
    tiny.write_text("\n".join(rows[:8]) + "\n")
    coord = create_coordinator_server(str(tmp_path / "jobs.sqlite"), "127.0.0.1:0")
    address = f"127.0.0.1:{coord.port}"
    guest = TableSource(path=str(FATE / "breast_hetero_guest.csv"), label="y")
    bank = create_party_server(
        PartyConfig(
            "bank",
            coordinator=address,
            state_dir=tmp_path / "bank-state",
            datasets={"breast": guest, "tiny": TableSource(path=str(tiny), label="y")},
        )
    )
    host = TableSource(path=str(FATE / "breast_hetero_host.csv"))
    shop = create_party_server(
        PartyConfig(
            "shop",
            coordinator=address,
            state_dir=tmp_path / "shop-state",
            datasets={"breast": host},
        )
    )
    client = CoordinatorClient(address)
    yield client, coord, bank, shop
    client.close()
    for server in (bank, shop, coord):
        server.stop(0)


def test_a_job_whose_validation_metric_is_undefined_ends_and_says_why(federation) -> None:
    client, *_ = federation
    # Execute: 7 rows, so the AUC of its one validation row is undefined (NaN)
    view = wait(client, client.submit(job(bank="tiny", epochs=1)), timeout=60.0)
    # Assert: it SUCCEEDED, with its numbers, and the AUC named as undefined with why
    assert view.state == "SUCCEEDED", view.reason
    r = view.result
    assert "auc" not in r.metrics and "accuracy" in r.metrics
    assert "one class" in r.undefined_metrics["auc"]
    assert all("auc" not in h.metrics for h in r.history)


def test_a_job_ended_without_success_leaves_no_model_part(federation) -> None:
    # Prepare: a job both parties trained and kept their parts of
    client, coord, bank, shop = federation
    view = wait(client, client.submit(job(epochs=1)))
    assert view.state == "SUCCEEDED", view.reason
    assert [m.model_id for m in bank.daemon.models()] == [view.job_id]
    assert [m.model_id for m in shop.daemon.models()] == [view.job_id]
    # Execute: the coordinator aborts the job everywhere, as it does when a job fails, is
    # cancelled or pauses after a party kept its part (AbortJob over gRPC)
    spec = parse_spec_text(job(epochs=1))
    coord.lifecycle.control.abort_all(view.job_id, spec, "cancelled by its owner")
    # Assert: no party keeps a part of a model that does not exist
    assert bank.daemon.models() == [] and shop.daemon.models() == []
