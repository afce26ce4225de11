"""Mutual TLS with party identity: real daemons on port 0 with federation certificates.

The right certificates run a job; a certificate from another CA, an expired one, one for
another party id, and none at all are each rejected with a message that names the fix.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from vfl.contract.spec import TableSource, parse_spec_text
from vfl.coordinator.client import CoordinatorClient
from vfl.coordinator.server import create_coordinator_server
from vfl.party.config import PartyConfig
from vfl.party.server import create_party_server
from vfl.proto import coordinator_pb2 as cpb, party_pb2, party_pb2_grpc
from vfl.rpc import dial, explain
from vfl.secure.pki.certs import CertError, PartyFiles, init_ca, issue
from vfl.secure.pki.federation import export_bundle, issue_identity, load_identity, local_federation

from tests.support.data import FATE
from tests.support.jobs import job, wait

pytestmark = pytest.mark.grpc

REPO = Path(__file__).resolve().parents[2]
IDS = ("coordinator", "admin", "bank", "shop", "carol")  # carol: a party that never registered
GHOST = job(name="ghost").replace("id: bank", "id: carol").replace("id: shop", "id: dave")


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("pki")
    fed = local_federation(root / "fed", IDS)
    other = local_federation(root / "other", ("admin", "bank", "coordinator"))
    now = dt.datetime.now(dt.timezone.utc)
    issue(
        fed,
        "old",
        hosts=("old", "127.0.0.1"),
        not_before=now - dt.timedelta(days=30),
        not_after=now - dt.timedelta(days=1),
    )
    return {"fed": fed, "other": other}


def files(ca_dir: Path, identity: str) -> PartyFiles:
    return PartyFiles(ca_dir / "ca.crt", ca_dir / f"{identity}.crt", ca_dir / f"{identity}.key")


@pytest.fixture(scope="module")
def tls_topology(pki, tmp_path_factory):
    fed = pki["fed"]
    db = tmp_path_factory.mktemp("db") / "jobs.sqlite"
    coord = create_coordinator_server(str(db), "127.0.0.1:0", load_identity(fed, "coordinator"))
    address = f"127.0.0.1:{coord.port}"
    states = tmp_path_factory.mktemp("states")
    parties = [
        create_party_server(
            PartyConfig(
                pid,
                "127.0.0.1:0",
                address,
                datasets={"breast": TableSource(path=str(FATE / file), label=y)},
                state_dir=states / pid,
            ),
            load_identity(fed, pid),
        )
        for pid, file, y in (
            ("bank", "breast_hetero_guest.csv", "y"),
            ("shop", "breast_hetero_host.csv", None),
        )
    ]
    yield address, coord, *parties
    for server in (*parties, coord):
        server.stop(0)


def rpc_error(fn) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as err:
        fn()
    return err.value


def push(address: str, tls: PartyFiles | None, sender: str, expect: str = "bank", job_id="j"):
    chunk = party_pb2.PushChunk(
        job_id=job_id, tag="t", sender=sender, receiver=expect, data=b"x", total_size=1
    )
    with dial(address, tls, expect=expect) as channel:
        return party_pb2_grpc.PartyServiceStub(channel).Push(iter([chunk]), timeout=10)


def test_a_job_runs_with_every_channel_mutually_authenticated(tls_topology, pki) -> None:
    address = tls_topology[0]
    with CoordinatorClient(address, load_identity(pki["fed"], "admin")) as client:
        view = wait(client, client.submit(job(epochs=2)))
    assert view.state == "SUCCEEDED", view.reason
    assert view.result.metrics["auc"] > 0.95 and view.result.intersection_size == 569


@pytest.mark.parametrize(
    ("trusts", "ca", "identity", "fragment"),
    [
        ("other", "other", "admin", "(unable to get local issuer certificate)"),  # other CA
        ("fed", "other", "admin", "rejecting this client's certificate"),  # foreign cert
        ("fed", "fed", "old", "rejecting this client's certificate"),  # expired
    ],
)
def test_a_client_with_a_foreign_or_expired_certificate_is_rejected(
    tls_topology, pki, trusts, ca, identity, fragment
) -> None:
    address = tls_topology[0]
    own = files(pki[ca], identity)
    tls = PartyFiles(pki[trusts] / "ca.crt", own.cert, own.key)
    with CoordinatorClient(address, tls) as client:
        err = rpc_error(client.jobs)
    assert err.code() == grpc.StatusCode.UNAVAILABLE
    message = explain(err, address, tls=True)
    assert fragment in message and "same federation CA (vfl certs)" in message


def test_a_client_without_a_certificate_is_rejected(tls_topology, pki) -> None:
    address = tls_topology[0]
    with CoordinatorClient(address) as client:  # no TLS at all
        err = rpc_error(client.jobs)
    assert "if it uses TLS, pass --tls DIR" in explain(err, address, tls=False)
    creds = grpc.ssl_channel_credentials((pki["fed"] / "ca.crt").read_bytes())  # no client cert
    with grpc.secure_channel(address, creds) as channel:
        stub = party_pb2_grpc.PartyServiceStub(channel)
        err = rpc_error(lambda: stub.GetPartyInfo(party_pb2.GetPartyInfoRequest(), timeout=10))
    assert err.code() == grpc.StatusCode.UNAVAILABLE


def test_a_server_from_another_ca_or_for_another_party_is_rejected(tls_topology, pki) -> None:
    _, _, bank, _ = tls_topology
    bank_address = f"127.0.0.1:{bank.port}"
    err = rpc_error(lambda: push(bank_address, files(pki["other"], "admin"), "admin"))
    assert "unable to get local issuer certificate" in explain(err, bank_address, True)
    err = rpc_error(lambda: push(bank_address, files(pki["fed"], "shop"), "shop", expect="shop"))
    message = explain(err, bank_address, True, "shop")
    assert "its certificate does not name party 'shop'" in message


def test_a_party_may_push_only_as_itself(tls_topology, pki) -> None:
    _, _, bank, _ = tls_topology
    bank_address = f"127.0.0.1:{bank.port}"
    shop = files(pki["fed"], "shop")
    err = rpc_error(lambda: push(bank_address, shop, sender="coordinator"))
    assert err.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "only party 'coordinator' may send envelopes" in err.details()
    assert "certificate names party 'shop'" in err.details()
    err = rpc_error(lambda: push(bank_address, shop, sender="shop"))  # itself: passes the check
    assert err.code() == grpc.StatusCode.FAILED_PRECONDITION and "not known" in err.details()


def test_control_rpcs_only_from_the_coordinator_and_reports_only_as_oneself(
    tls_topology, pki
) -> None:

    address, _, bank, _ = tls_topology
    shop = files(pki["fed"], "shop")
    spec = parse_spec_text(job()).to_json()
    with dial(f"127.0.0.1:{bank.port}", shop, expect="bank") as channel:
        stub = party_pb2_grpc.PartyServiceStub(channel)
        request = party_pb2.PrepareJobRequest(job_id="evil", spec_json=spec)
        err = rpc_error(lambda: stub.PrepareJob(request, timeout=10))
        info = stub.GetPartyInfo(party_pb2.GetPartyInfoRequest(), timeout=10)
    assert err.code() == grpc.StatusCode.PERMISSION_DENIED and "coordinator" in err.details()
    assert info.party_id == "bank" and "evil" not in info.running_jobs
    with CoordinatorClient(address, shop) as client:
        err = rpc_error(lambda: client.register("bank", "127.0.0.1:1", []))
        assert err.code() == grpc.StatusCode.PERMISSION_DENIED
        err = rpc_error(
            lambda: client.report(
                cpb.ReportProgressRequest(job_id="nope", party_id="bank", failed=cpb.PartyFailed())
            )
        )
        assert err.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "only party 'bank' may report progress" in err.details()


@pytest.fixture(scope="module")
def model(tls_topology, pki) -> str:
    """A split model that bank (active) and shop (passive) keep."""
    with CoordinatorClient(tls_topology[0], load_identity(pki["fed"], "admin")) as client:
        view = wait(client, client.submit(job(name="model", epochs=1)))
    assert view.state == "SUCCEEDED", view.reason
    return view.job_id


def test_online_scoring_only_for_the_federation_and_never_a_passive_party(
    tls_topology, pki, model
) -> None:
    address, _, bank, shop = tls_topology
    request = party_pb2.PredictRequest(model_id=model, ids=["133"])

    def predict(identity: str, ca: str = "fed"):
        with dial(bank.address, files(pki[ca], identity), expect="bank") as channel:
            return party_pb2_grpc.PartyServiceStub(channel).Predict(request, timeout=30)

    assert predict("admin").results[0].values[0] > 0  # an operator scores
    assert predict("carol").results[0].error == party_pb2.ID_ERROR_UNSPECIFIED
    message = denied(lambda: predict("shop"))
    assert f"'shop' may not score with model {model} at party 'bank'" in message
    assert "it is a passive party" in message
    err = rpc_error(lambda: predict("admin", ca="other"))  # another CA: no handshake
    assert err.code() == grpc.StatusCode.UNAVAILABLE
    opening = party_pb2.OpenScoringRequest(model_id=model, session_id="s-evil", reply_to="x:1")
    with dial(shop.address, files(pki["fed"], "admin"), expect="shop") as channel:
        stub = party_pb2_grpc.PartyServiceStub(channel)
        message = denied(lambda: stub.OpenScoring(opening, timeout=30))
    assert f"only the active party 'bank' of model {model} may open a scoring" in message
    tls = ("--tls", str(pki["fed"]), "--identity", "admin", "--coordinator", address)
    out = vfl("score", model, "--id", "133", "--id", "nope", *tls)
    assert out.returncode == 1 and out.stdout.startswith("133\tscore="), out.stderr
    assert "nope\terror unknown_id: party 'bank' holds no row with id 'nope'" in out.stdout
    out = vfl("score", model, "--id", "133", *tls[:-4], "--identity", "shop", *tls[-2:])
    assert out.returncode == 2 and "it is a passive party" in out.stderr


@pytest.fixture(scope="module")
def held_jobs(tls_topology) -> tuple[str, str]:
    """Two jobs in the store, never launched: one of bank and shop, one of carol and dave."""
    store = tls_topology[1].lifecycle.store
    ours = store.create("ours", job(), parse_spec_text(job()).to_json())
    ghost = store.create("ghost", GHOST, parse_spec_text(GHOST).to_json())
    return ours, ghost


def denied(fn) -> str:
    err = rpc_error(fn)
    assert err.code() == grpc.StatusCode.PERMISSION_DENIED, err.details()
    return err.details()


def test_a_party_reads_only_the_jobs_it_is_in_and_controls_none(
    tls_topology, pki, held_jobs
) -> None:
    address = tls_topology[0]
    ours, ghost = held_jobs
    with CoordinatorClient(address, files(pki["fed"], "bank")) as bank:
        listed = {j.job_id for j in bank.jobs()}
        assert ours in listed and ghost not in listed
        assert bank.get(ours).state == "SUBMITTED"
        assert next(iter(bank.watch(ours))).job_id == ours
        message = denied(lambda: bank.get(ghost))
        assert "'bank' is a party" in message and "may list and read the jobs it is in" in message
        assert f"job {ghost} is not one of them" in message
        denied(lambda: next(iter(bank.watch(ghost))))
        message = denied(lambda: bank.submit(job()))
        assert "'bank' is a party" in message and "may not submit jobs" in message
        assert "operator's certificate (e.g. 'admin'" in message
        assert f"may not cancel job {ours}" in denied(lambda: bank.cancel(ours))
        assert f"may not resume job {ours}" in denied(lambda: bank.resume(ours))
        assert "may not cancel" in denied(lambda: bank.cancel(ghost))
    with CoordinatorClient(address, files(pki["fed"], "admin")) as admin:
        assert admin.get(ours).state == "SUBMITTED"  # nothing was cancelled


def test_an_unregistered_identity_is_a_party_of_the_jobs_that_name_it(
    tls_topology, pki, held_jobs
) -> None:
    address = tls_topology[0]
    ours, ghost = held_jobs
    with CoordinatorClient(address, files(pki["fed"], "carol")) as carol:
        assert carol.get(ghost).state == "SUBMITTED"
        assert "'carol' is a party" in denied(lambda: carol.cancel(ghost))
        assert "may not submit jobs" in denied(lambda: carol.submit(GHOST))


def test_an_operator_keeps_full_control(tls_topology, pki, held_jobs) -> None:
    address = tls_topology[0]
    ours, ghost = held_jobs
    with CoordinatorClient(address, files(pki["fed"], "admin")) as admin:
        assert {ours, ghost} <= {j.job_id for j in admin.jobs()}
        assert admin.get(ghost).state == "SUBMITTED"
        assert admin.cancel(ghost) == "CANCELLED"


def test_the_cli_says_what_a_party_may_do(tls_topology, pki, held_jobs) -> None:
    address = tls_topology[0]
    ours, _ = held_jobs
    tls = ("--coordinator", address, "--tls", str(pki["fed"]), "--identity", "shop")
    out = vfl("cancel", ours, *tls)
    assert out.returncode == 2 and "'shop' is a party" in out.stderr
    assert "may list and read the jobs it is in" in out.stderr
    out = vfl("jobs", *tls)
    assert out.returncode == 0 and ours in out.stdout


def test_a_party_lists_its_models_and_deletes_none(tls_topology, pki) -> None:
    # Prepare: a job of bank and shop that succeeded is a model (their parts: none here)
    address, coord, bank, _ = tls_topology
    store = coord.lifecycle.store
    model_id = store.create("kept", job(), parse_spec_text(job()).to_json())
    store.set_state(model_id, cpb.JOB_STATE_SUCCEEDED)
    # Execute + Assert: the bank lists and shows it, may not delete it
    with CoordinatorClient(address, files(pki["fed"], "bank")) as client:
        assert model_id in {m.model_id for m in client.models()}
        assert client.model(model_id).model_id == model_id
        message = denied(lambda: client.delete_model(model_id))
        assert "'bank' is a party" in message and f"may not delete model {model_id}" in message
    # ... nor may the shop ask the bank's daemon to drop its part: only the coordinator
    with dial(f"127.0.0.1:{bank.port}", files(pki["fed"], "shop"), expect="bank") as channel:
        stub = party_pb2_grpc.PartyServiceStub(channel)
        request = party_pb2.DeleteModelPartRequest(model_id=model_id)
        message = denied(lambda: stub.DeleteModelPart(request, timeout=10))
    assert "only party 'coordinator' may delete a party's models" in message
    with CoordinatorClient(address, files(pki["fed"], "admin")) as admin:
        assert admin.delete_model(model_id).state == cpb.MODEL_STATE_DELETED


def test_a_party_with_a_foreign_certificate_cannot_register(tls_topology, pki) -> None:
    address = tls_topology[0]
    config = PartyConfig("bank", "127.0.0.1:0", address)
    with pytest.raises(RuntimeError, match="cannot register party 'bank'.*TLS handshake"):
        create_party_server(config, files(pki["other"], "bank"))


def test_load_identity_names_the_problem(pki, tmp_path) -> None:
    fed = pki["fed"]
    with pytest.raises(CertError, match="missing: in .*, run `vfl certs request --party nobody`"):
        load_identity(fed, "nobody")
    with pytest.raises(CertError, match="expired on"):
        load_identity(fed, "old")
    bundle = export_bundle(fed, "bank", tmp_path / "bank")
    assert load_identity(bundle, "bank").cert == bundle / "bank.crt"
    (bundle / "bank.key").write_bytes((fed / "shop.key").read_bytes())
    with pytest.raises(CertError, match="does not belong to"):
        load_identity(bundle, "bank")
    (bundle / "ca.crt").write_bytes((pki["other"] / "ca.crt").read_bytes())
    with pytest.raises(CertError, match="not issued by this federation's CA"):
        load_identity(bundle, "bank")
    init_ca(tmp_path / "ca")
    issue_identity(tmp_path / "ca", "bank")
    (tmp_path / "ca" / "bank.crt").rename(tmp_path / "ca" / "shop.crt")
    (tmp_path / "ca" / "bank.key").rename(tmp_path / "ca" / "shop.key")
    with pytest.raises(CertError, match="names party 'bank', not 'shop'"):
        load_identity(tmp_path / "ca", "shop")


def vfl(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "vfl.cli.main", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO)


def test_cli_certs_health_and_a_clear_handshake_error(tls_topology, pki, tmp_path) -> None:
    address = tls_topology[0]
    ca = tmp_path / "ca"
    assert vfl("certs", "init", str(ca)).returncode == 0
    out = vfl("certs", "issue", str(ca), "--party", "admin", "--bundle", str(tmp_path / "b"))
    assert out.returncode == 0 and "--tls" in out.stdout
    again = vfl("certs", "issue", str(ca), "--party", "admin")
    assert again.returncode == 2 and "already exists" in again.stderr
    ok = vfl("health", address, "--tls", str(pki["fed"]), "--identity", "admin")
    assert ok.returncode == 0 and "SERVING" in ok.stdout
    foreign = vfl("jobs", "--coordinator", address, "--tls", str(tmp_path / "b"))
    assert foreign.returncode == 3
    assert f"TLS handshake with {address} failed" in foreign.stderr
    assert "same federation CA (vfl certs)" in foreign.stderr


def test_demo_runs_with_tls_by_default_and_warns_when_insecure(tmp_path) -> None:
    out = vfl(
        "demo", "--protocol", "split", "--json", "--insecure", "--workdir", str(tmp_path / "run")
    )
    assert out.returncode == 0 and json.loads(out.stdout)["state"] == "SUCCEEDED"
    assert "warning: --insecure" in out.stderr and not (tmp_path / "run" / "tls").exists()
    assert "warning: no TLS" in (tmp_path / "run" / "coordinator.log").read_text()
