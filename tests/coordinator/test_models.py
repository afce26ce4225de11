"""The models the federation holds: a model's state from its parties' answers and its
delete, who may delete, and (real gRPC servers in this process, parts saved as a job
leaves them) listing, a delete a party missed, and a later delete completing it."""

from __future__ import annotations

import grpc
import pytest
from vfl.cli.models import format_model, format_table
from vfl.contract.spec import JobSpec, parse_spec_text
from vfl.contract.spec.predict import PredictSpec
from vfl.contract.states import (
    AVAILABLE,
    CORRUPT,
    DELETED,
    DELETING,
    INCOMPLETE,
    SUCCEEDED,
    TRAINING,
)
from vfl.coordinator.access import Access
from vfl.coordinator.client import CoordinatorClient
from vfl.coordinator.errors import AccessDenied, UnknownModel
from vfl.coordinator.models import summarise
from vfl.coordinator.server import create_coordinator_server
from vfl.coordinator.store import JobRecord, JobStore, ModelDeletion
from vfl.party.config import PartyConfig
from vfl.party.server import create_party_server
from vfl.party.state import StateDir
from vfl.party.state.model_store import Column, Manifest, ModelStore
from vfl.proto import coordinator_pb2 as pb, party_pb2, party_pb2_grpc
from vfl.rpc import dial

from tests.support.jobs import job

SPEC = parse_spec_text(job(name="m"))
RECORD = JobRecord(
    job_id="m-1",
    name="m",
    spec_yaml=job(name="m"),
    spec_json=SPEC.to_json(),
    state=SUCCEEDED,
    reason="",
    created_at=1.0,
    updated_at=2.0,  # it succeeded then
    result=pb.JobResult(metrics={"auc": 0.98}),
)


def part(model_id: str = "m-1", role: str = "active") -> party_pb2.ModelPart:
    return party_pb2.ModelPart(model_id=model_id, role=role, protocol="split", columns=3)


# --- a model's state -----------------------------------------------------------------


def test_a_model_every_party_holds_is_available_with_its_metrics() -> None:
    s = summarise(RECORD, SPEC, {"bank": [part()], "shop": [part(role="passive")]}, None)
    assert s.state == AVAILABLE and list(s.holders) == ["bank", "shop"]
    assert (list(s.missing), list(s.unreachable)) == ([], [])
    assert s.metrics["auc"] == 0.98 and s.created_at == 2.0 and s.protocol == "split"
    assert [(h.party_id, h.role, h.columns) for h in s.parts] == [
        ("bank", "active", 3),
        ("shop", "passive", 3),
    ]


def test_a_party_that_answers_without_a_part_makes_it_incomplete() -> None:
    s = summarise(RECORD, SPEC, {"bank": [part()], "shop": [part("other-2")]}, None)
    assert s.state == INCOMPLETE and list(s.missing) == ["shop"] and list(s.holders) == ["bank"]


def test_a_party_holding_a_corrupt_part_makes_it_corrupt_and_says_why() -> None:
    bad = part(role="passive")
    bad.problem = "party 'shop': part of model m-1 is corrupt"
    s = summarise(RECORD, SPEC, {"bank": [part()], "shop": [bad]}, None)
    assert s.state == CORRUPT and list(s.holders) == ["bank", "shop"] and not s.missing
    assert {h.party_id: h.problem for h in s.parts} == {"bank": "", "shop": bad.problem}
    assert "shop (corrupt)" in format_table([s])
    assert "shop: holds a part that cannot score: party 'shop': part of model m-1 is corrupt" in (
        format_model(s)
    )


def test_a_silent_party_is_unreachable_not_missing() -> None:
    s = summarise(RECORD, SPEC, {"bank": [part()], "shop": None}, None)
    assert s.state == AVAILABLE and list(s.unreachable) == ["shop"] and not s.missing


def test_a_delete_pending_at_a_silent_party_lists_it_as_still_holding_a_part() -> None:
    deletion = ModelDeletion("m-1", 5.0, ("shop",))
    s = summarise(RECORD, SPEC, {"bank": [], "shop": None}, deletion)
    assert s.state == DELETING and s.deleted_at == 5.0
    assert list(s.holders) == list(s.unreachable) == ["shop"] and not s.missing


def test_a_delete_every_party_confirmed_is_deleted() -> None:
    s = summarise(RECORD, SPEC, {}, ModelDeletion("m-1", 5.0, ()))
    assert s.state == DELETED and not s.holders and not s.unreachable and not s.parts


# --- who may delete ------------------------------------------------------------------


def test_only_an_operator_may_delete_a_model_and_a_party_shows_only_its_own(tmp_path) -> None:
    store = JobStore(tmp_path / "jobs.sqlite")
    store.register_party("bank", "127.0.0.1:1", ["breast"])
    model_id = store.create("m", job(name="m"), SPEC.to_json())
    access = Access(store, lambda job_id: JobSpec.from_json(store.get(job_id).spec_json))
    for caller in (None, "admin"):  # no TLS; an operator
        access.check_delete_model(caller, model_id)
        access.check_model_read(caller, model_id)
    access.check_model_read("bank", model_id)
    with pytest.raises(AccessDenied) as err:
        access.check_delete_model("bank", model_id)
    assert "'bank' is a party" in str(err.value) and f"may not delete model {model_id}" in str(
        err.value
    )
    assert "operator's certificate" in str(err.value)
    ghost = job(name="g").replace("id: bank", "id: carol")
    other = store.create("g", ghost, parse_spec_text(ghost).to_json())
    with pytest.raises(AccessDenied, match="not one of them"):
        access.check_model_read("bank", other)


# --- over gRPC -----------------------------------------------------------------------


def keep_part(state_dir, model_id: str, party: str) -> None:
    """Save `party`'s part of `model_id` as a successful job does."""
    role = "active" if party == "bank" else "passive"
    manifest = Manifest(
        model_id=model_id,
        name="m",
        party_id=party,
        role=role,
        protocol="split",
        columns=(Column(name="secret_income", kind="dense"),),
        spec_json=SPEC.to_json(),
        spec_hash=SPEC.spec_hash(),
    )
    ModelStore(StateDir.create(state_dir)).save(manifest, {"w": [1.0]})


@pytest.fixture
def federation(tmp_path):
    """A coordinator holding one model (a succeeded job) that bank and shop both hold."""
    coord = create_coordinator_server(str(tmp_path / "jobs.sqlite"), "127.0.0.1:0")
    address = f"127.0.0.1:{coord.port}"
    store = coord.lifecycle.store
    model_id = store.create("m", job(name="m"), SPEC.to_json())
    store.set_state(model_id, SUCCEEDED, result=pb.JobResult(metrics={"auc": 0.98}))
    configs = {
        p: PartyConfig(p, coordinator=address, state_dir=tmp_path / p) for p in ("bank", "shop")
    }
    for party, config in configs.items():
        keep_part(config.state_dir, model_id, party)
    parties = {p: create_party_server(c) for p, c in configs.items()}
    yield coord, parties, configs, model_id
    for server in parties.values():
        server.stop(0)
    coord.stop(0)


@pytest.mark.grpc
def test_a_party_tells_which_parts_it_keeps_never_their_columns(federation) -> None:
    coord, parties, _, model_id = federation
    with dial(parties["bank"].address) as channel:
        stub = party_pb2_grpc.PartyServiceStub(channel)
        answer = stub.ListModelParts(party_pb2.ListModelPartsRequest(), timeout=10)
    assert [(p.model_id, p.role, p.columns) for p in answer.parts] == [(model_id, "active", 1)]
    assert b"secret_income" not in answer.SerializeToString()
    with CoordinatorClient(f"127.0.0.1:{coord.port}") as client:
        (listed,) = client.models()
    assert listed.model_id == model_id and listed.state == AVAILABLE
    assert list(listed.holders) == ["bank", "shop"] and listed.metrics["auc"] == 0.98


@pytest.mark.grpc
def test_a_corrupt_part_or_manifest_is_named_and_the_model_is_not_available(federation) -> None:
    # Prepare: one byte of the shop's part flipped, as a bad disk or a torn copy leaves it
    coord, _, configs, model_id = federation
    shop_part = configs["shop"].state_dir / "models" / model_id / "part.ckpt"
    data = bytearray(shop_part.read_bytes())
    data[-1] ^= 0xFF
    shop_part.write_bytes(bytes(data))
    with CoordinatorClient(f"127.0.0.1:{coord.port}") as client:
        # Execute
        model = client.model(model_id)
        # Assert: not available; the shop's part says what is wrong and the fix, no path
        assert model.state == CORRUPT and list(model.holders) == ["bank", "shop"]
        problems = {h.party_id: h.problem for h in model.parts}
        assert problems["bank"] == ""
        assert problems["shop"].startswith(f"party 'shop': part of model {model_id} is corrupt")
        assert f"`vfl models delete {model_id}`" in problems["shop"]
        assert str(configs["shop"].state_dir) not in problems["shop"]
        # Execute: the bank's manifest unreadable too; then the shop's part kept again
        manifest = configs["bank"].state_dir / "models" / model_id / "manifest.json"
        manifest.write_text("{not json")
        keep_part(configs["shop"].state_dir, model_id, "shop")
        model = client.model(model_id)
        # Assert
        assert model.state == CORRUPT
        problems = {h.party_id: h.problem for h in model.parts}
        assert problems["bank"].startswith(f"party 'bank': its manifest of model {model_id}")
        assert problems["shop"] == ""  # checked again: its files changed
        keep_part(configs["bank"].state_dir, model_id, "bank")
        assert client.model(model_id).state == AVAILABLE


@pytest.mark.grpc
def test_a_training_job_still_running_or_a_prediction_is_no_model(federation) -> None:
    coord, *_ = federation
    store = coord.lifecycle.store
    running = store.create("r", job(name="r"), SPEC.to_json())
    store.set_state(running, TRAINING)
    with CoordinatorClient(f"127.0.0.1:{coord.port}") as client:
        assert running not in {m.model_id for m in client.models()}
        with pytest.raises(grpc.RpcError) as err:
            client.model(running)
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        assert f"job {running} is TRAINING, so it left no model" in err.value.details()
        with pytest.raises(grpc.RpcError) as err:
            client.delete_model("nope")
        assert err.value.details() == "no model nope; list them with `vfl models`"


@pytest.mark.grpc
def test_a_delete_a_party_missed_is_completed_by_a_later_delete(federation) -> None:
    # Prepare: the shop lost its part (incomplete), then it is down
    coord, parties, configs, model_id = federation
    ModelStore(StateDir.create(configs["shop"].state_dir)).delete(model_id)
    with CoordinatorClient(f"127.0.0.1:{coord.port}") as client:
        assert client.model(model_id).state == INCOMPLETE
        keep_part(configs["shop"].state_dir, model_id, "shop")
        parties.pop("shop").stop(0)
        # Execute: delete while the shop is down
        deleting = client.delete_model(model_id)
        listed = client.models()
        # Assert: the shop is listed as still holding its part; the model cannot score
        assert deleting.state == DELETING and list(deleting.holders) == ["shop"]
        assert list(deleting.unreachable) == ["shop"] and deleting.deleted_at > 0
        assert [(m.model_id, m.state) for m in listed] == [(model_id, DELETING)]
        assert ModelStore(StateDir.create(configs["bank"].state_dir)).list() == []
        with pytest.raises(UnknownModel, match=f"model {model_id} was deleted on .* train it"):
            coord.lifecycle.submit_prediction(
                PredictSpec(model=model_id, data={"bank": "b", "shop": "s"}), ""
            )
        # Execute: the shop is back at another address (without registering itself: the
        # coordinator's registry learns it), and the model is deleted again
        shop = create_party_server(PartyConfig("shop", state_dir=configs["shop"].state_dir))
        parties["shop"] = shop
        coord.lifecycle.store.register_party("shop", shop.address, [])
        done = client.delete_model(model_id)
        # Assert
        assert done.state == DELETED and not done.holders
        assert client.models() == [] and client.model(model_id).state == DELETED
        assert ModelStore(StateDir.create(configs["shop"].state_dir)).list() == []


@pytest.mark.grpc
def test_a_party_without_a_state_directory_holds_no_models(tmp_path) -> None:
    server = create_party_server(PartyConfig("bank"))
    try:
        assert server.daemon.models() == [] and server.daemon.delete_model("m-1") is False
    finally:
        server.stop(0)
