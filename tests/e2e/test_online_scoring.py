"""Online scoring (`Predict`, `vfl score`) against real daemons in one process: a blindfl and
a split model trained on the breast data, scored by id, compared with a batch prediction
of the same model; per-id errors, micro-batching, bad input, a lost passive party and the
wire audit of a session."""

from __future__ import annotations

import csv
import json
import struct
import threading
import time
from pathlib import Path

import grpc
import pytest
from vfl.cli.main import main
from vfl.contract.spec import TableSource
from vfl.coordinator.client import CoordinatorClient
from vfl.coordinator.server import create_coordinator_server
from vfl.party.config import PartyConfig
from vfl.party.daemon import DaemonOptions
from vfl.party.server import create_party_server
from vfl.party.state.model_store import ModelStore
from vfl.party.transport.audit import read_audit
from vfl.proto import party_pb2 as pb, party_pb2_grpc
from vfl.rpc import dial

from tests.support.data import FATE
from tests.support.jobs import wait
from tests.support.wire_audit import assert_online_payloads

pytestmark = pytest.mark.grpc

ONLY_AT_BANK = ("133", "273")  # rows the shop's dataset leaves out
SCORED = ("392", "18", "405", "444", "125", "320", "186", "62")  # rows both parties hold

TRAIN = """
job: {name}
protocol: {protocol}
crypto: {{key_bits: 1024, allow_insecure_test_keys: true}}
parties:
  - {{id: bank, role: active, data: {{dataset: breast}}}}
  - {{id: shop, role: passive, data: {{dataset: breast}}}}
model: {{source: {{out_dim: 4}}, top: {{hidden: [8]}}}}
train: {{epochs: 1, batch_size: 128, checkpoint_every: 0}}
validation: {{every: 1000}}
"""


class Federation:
    """A coordinator, the bank (active) and the shop (passive), each with a state
    directory; the shop's breast table lacks the rows `ONLY_AT_BANK`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.coord = create_coordinator_server(str(root / "jobs.sqlite"), "127.0.0.1:0")
        self.address = f"127.0.0.1:{self.coord.port}"
        rows = (FATE / "breast_hetero_host.csv").read_text().splitlines()
        self.shop_csv = root / "shop.csv"
        kept = [r for r in rows if r.split(",")[0] not in ONLY_AT_BANK]
        self.shop_csv.write_text("\n".join(kept) + "\n")
        options = DaemonOptions(audit_dir=str(root / "audit"), scoring_timeout_s=2.0)
        self.bank_csv = root / "bank.csv"
        self.bank_csv.write_text((FATE / "breast_hetero_guest.csv").read_text())
        guest = TableSource(path=str(self.bank_csv), label="y")
        self.bank = create_party_server(self._config("bank", guest), options=options)
        self.shop = self.start_shop("127.0.0.1:0")
        self.client = CoordinatorClient(self.address)
        self.options = options

    def _config(self, party: str, table: TableSource, listen="127.0.0.1:0") -> PartyConfig:
        return PartyConfig(
            party,
            listen,
            self.address,
            datasets={"breast": table},
            state_dir=self.root / party,
            output_dir=self.root / f"{party}-scores",
        )

    def start_shop(self, listen: str):
        options = DaemonOptions(audit_dir=str(self.root / "audit"), scoring_timeout_s=2.0)
        table = TableSource(path=str(self.shop_csv))
        return create_party_server(self._config("shop", table, listen), options=options)

    def train(self, protocol: str) -> str:
        view = wait(self.client, self.client.submit(TRAIN.format(name=protocol, protocol=protocol)))
        assert view.state == "SUCCEEDED", view.reason
        return view.job_id

    def batch_scores(self, model: str) -> dict[str, float]:
        """Every row's score from a batch prediction job with `model`."""
        job = self.client.predict(f"model: {model}\ndata: {{bank: breast, shop: breast}}\n")
        view = wait(self.client, job)
        assert view.state == "SUCCEEDED", view.reason
        path = self.root / "bank-scores" / f"{job}.csv"
        with path.open() as fh:
            return {row["id"]: float(row["score"]) for row in csv.DictReader(fh)}

    def stop(self) -> None:
        self.client.close()
        for server in (self.bank, self.shop, self.coord):
            server.stop(0)


@pytest.fixture(scope="module")
def fed(tmp_path_factory):
    federation = Federation(tmp_path_factory.mktemp("online"))
    federation.models = {p: federation.train(p) for p in ("blindfl", "split")}
    yield federation
    federation.stop()


def predict(address: str, model: str, ids, tls=None, expect=None) -> pb.PredictResponse:
    with dial(address, tls, expect=expect) as channel:
        stub = party_pb2_grpc.PartyServiceStub(channel)
        return stub.Predict(pb.PredictRequest(model_id=model, ids=list(ids)), timeout=60)


def rpc_error(fn) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as err:
        fn()
    return err.value


@pytest.mark.parametrize("protocol", ["blindfl", "split"])
def test_online_scores_are_the_batch_prediction_scores(fed, protocol) -> None:
    # Prepare
    model = fed.models[protocol]
    batch = fed.batch_scores(model)
    ids = [*SCORED[:3], ONLY_AT_BANK[0], "no-such-id", SCORED[3]]
    # Execute
    resp = predict(fed.bank.address, model, ids)
    # Assert
    assert [r.id for r in resp.results] == ids and list(resp.columns) == ["score"]
    by_id = {r.id: r for r in resp.results}
    for i in (*SCORED[:4],):
        assert by_id[i].error == pb.ID_ERROR_UNSPECIFIED, by_id[i].message
        assert abs(by_id[i].values[0] - batch[i]) <= 1e-4
        assert by_id[i].predicted_class == ("1" if batch[i] >= 0.5 else "0")
    missing = by_id[ONLY_AT_BANK[0]]
    assert missing.error == pb.ID_ERROR_NOT_AT_PEER
    assert missing.message == f"party 'shop' holds no row with id '{ONLY_AT_BANK[0]}'"
    unknown = by_id["no-such-id"]
    assert unknown.error == pb.ID_ERROR_UNKNOWN_ID
    assert unknown.message == "party 'bank' holds no row with id 'no-such-id'"


def test_concurrent_requests_are_micro_batched(fed) -> None:
    model = fed.models["blindfl"]
    predict(fed.bank.address, model, SCORED[:1])  # the session is open
    served = fed.bank.daemon.online.served(model)
    before = served.batcher.batches
    results: dict[str, float] = {}
    start = threading.Barrier(len(SCORED))

    def one(i: str) -> None:
        start.wait()
        results[i] = predict(fed.bank.address, model, [i]).results[0].values[0]

    threads = [threading.Thread(target=one, args=(i,)) for i in SCORED]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    together = predict(fed.bank.address, model, SCORED)
    assert results == pytest.approx({r.id: r.values[0] for r in together.results}, abs=1e-6)
    assert served.batcher.batches - before - 1 < len(SCORED)  # fewer forwards than requests


def test_an_unknown_model_or_a_bad_request_is_a_named_error(fed) -> None:
    err = rpc_error(lambda: predict(fed.bank.address, "j-nope", ["1"]))
    assert err.code() == grpc.StatusCode.NOT_FOUND
    assert "party 'bank' holds no model j-nope" in err.details()
    model = fed.models["split"]
    err = rpc_error(lambda: predict(fed.shop.address, model, ["1"]))
    assert err.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "as a passive party; score at its active party 'bank'" in err.details()
    err = rpc_error(lambda: predict(fed.bank.address, model, []))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    err = rpc_error(lambda: predict(fed.bank.address, model, ["1"] * 1025))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "at most 1024" in err.details()


def test_vfl_score_prints_one_line_per_id(fed, capsys) -> None:
    model = fed.models["split"]
    args = ["score", model, "--id", SCORED[0], "--id", "no-such-id", "--coordinator"]
    assert main([*args, fed.address]) == 1  # one id was not scored
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{SCORED[0]}\tscore=")
    assert out[0].split("\t")[2] in ("class=0", "class=1")
    assert out[1] == "no-such-id\terror unknown_id: party 'bank' holds no row with id 'no-such-id'"
    assert main(["score", model, "--id", SCORED[0], "--party", fed.bank.address, "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert plain["model"] == model and plain["results"][0]["id"] == SCORED[0]
    assert main(["score", "j-nope", "--id", "1", "--coordinator", fed.address]) == 2
    assert "no model j-nope; list them with `vfl models`" in capsys.readouterr().err


def test_vfl_score_escapes_ids_that_would_break_a_line_or_drive_the_terminal(fed, capsys) -> None:
    # Prepare: an id with an escape sequence (clear the screen), a line break and a tab
    model = fed.models["split"]
    odd = "9\x1b[2J\nfake\tline"
    # Execute
    code = main(["score", model, "--id", odd, "--id", SCORED[0], "--coordinator", fed.address])
    # Assert: one line per id; the odd one shown escaped (the party's message quotes it so)
    out = capsys.readouterr().out
    assert code == 1 and "\x1b" not in out
    lines = out.splitlines()
    assert len(lines) == 2 and lines[1].startswith(f"{SCORED[0]}\tscore=")
    shown = "9\\x1b[2J\\nfake\\tline"
    assert lines[0] == f"{shown}\terror unknown_id: party 'bank' holds no row with id '{shown}'"


def test_a_session_sends_only_ids_positions_and_ciphertexts(fed) -> None:
    model = fed.models["blindfl"]
    resp = predict(fed.bank.address, model, [*SCORED, ONLY_AT_BANK[1]])
    scores = [r.values[0] for r in resp.results if not r.error]
    records = [r for r in read_audit(fed.root / "audit") if r["job"].startswith("score-")]
    sessions = {r["job"] for r in records}
    blind = {s for s in sessions if s.startswith(f"score-{model}-")}
    assert blind, sessions
    encoded = [struct.pack("<d", s) for s in scores] + [struct.pack("<f", s) for s in scores]
    session = [r for r in records if r["job"] in blind]
    assert_online_payloads(session, "bank", {"shop"}, encoded)


def _add_person(table: Path, like: str, new_id: str) -> None:
    """Append a row to a party's table: the row of `like` under the id `new_id`."""
    lines = table.read_text().splitlines()
    row = next(line for line in lines if line.split(",")[0] == like)
    table.write_text("\n".join([*lines, ",".join([new_id, *row.split(",")[1:]])]) + "\n")


@pytest.mark.parametrize("protocol", ["blindfl", "split"])
def test_people_added_to_the_tables_are_scored_without_a_restart(fed, protocol) -> None:
    # Prepare: a served model; a new person, who has the features of SCORED[0]
    model, new = fed.models[protocol], f"new-{protocol}"
    before = predict(fed.bank.address, model, [SCORED[0], new]).results
    assert before[0].error == pb.ID_ERROR_UNSPECIFIED
    assert before[1].error == pb.ID_ERROR_UNKNOWN_ID
    # Execute / Assert: the bank adds the person first, the shop does not hold them yet
    _add_person(fed.bank_csv, SCORED[0], new)
    (result,) = predict(fed.bank.address, model, [new]).results
    assert result.error == pb.ID_ERROR_NOT_AT_PEER, result.message
    # then the shop adds them too: scored as the row with the same features
    _add_person(fed.shop_csv, SCORED[0], new)
    (result,) = predict(fed.bank.address, model, [new]).results
    assert result.error == pb.ID_ERROR_UNSPECIFIED, result.message
    assert abs(result.values[0] - before[0].values[0]) <= 1e-6


def test_a_lost_passive_party_fails_the_request_by_name_and_is_rejoined(fed) -> None:
    model = fed.models["blindfl"]
    predict(fed.bank.address, model, SCORED[:1])
    port = fed.shop.port
    fed.shop.stop(0)
    err = rpc_error(lambda: predict(fed.bank.address, model, SCORED[:2]))
    assert err.code() == grpc.StatusCode.UNAVAILABLE and "party 'shop'" in err.details()
    fed.shop = fed.start_shop(f"127.0.0.1:{port}")
    assert fed.bank.clients.ready(f"127.0.0.1:{port}", "shop", 10)  # reconnected (<= 5 s)
    resp = predict(fed.bank.address, model, SCORED[:2])
    assert [r.error for r in resp.results] == [pb.ID_ERROR_UNSPECIFIED] * 2


@pytest.mark.parametrize("protocol", ["split", "blindfl"])
def test_a_passive_party_restarted_at_another_address_is_found_there(fed, protocol) -> None:
    # Prepare: scoring works; then the shop's daemon moves to another port
    model = fed.models[protocol]
    predict(fed.bank.address, model, SCORED[:1])
    old = fed.shop.address
    fed.shop.stop(0)
    fed.shop = fed.start_shop("127.0.0.1:0")
    registered = fed.coord.lifecycle.store.parties
    deadline = time.monotonic() + 10
    while registered().get("shop") != fed.shop.address and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fed.shop.address != old and registered()["shop"] == fed.shop.address
    # Execute: the bank scores, its model trained with the shop's old address
    resp = predict(fed.bank.address, model, SCORED[:3])
    # Assert: the session found the shop where it registered now
    assert [r.error for r in resp.results] == [pb.ID_ERROR_UNSPECIFIED] * 3


def test_a_deleted_model_is_not_found(fed) -> None:
    model = fed.models["blindfl"]
    ModelStore(fed.shop.daemon.state).delete(model)  # the passive party deletes its part
    fed.shop.daemon.online.unload(model)  # as its DeleteModel does
    err = rpc_error(lambda: predict(fed.bank.address, model, SCORED[:1]))
    assert err.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert f"party 'shop' cannot score with model {model}" in err.details()
    assert f"party 'shop' holds no part of model {model}" in err.details()
    split = fed.models["split"]
    ModelStore(fed.bank.daemon.state).delete(split)  # the active party deletes its part
    err = rpc_error(lambda: predict(fed.bank.address, split, SCORED[:1]))
    assert err.code() == grpc.StatusCode.NOT_FOUND
    assert f"party 'bank' holds no model {split}" in err.details()
    info = pb.GetPartyInfoRequest()
    for daemon in (fed.bank, fed.shop):  # every daemon still answers
        with dial(daemon.address) as channel:
            party_pb2_grpc.PartyServiceStub(channel).GetPartyInfo(info, timeout=5)
