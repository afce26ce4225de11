"""A scoring session over the in-process channel (protocol tier): a blindfl model of three
parties scores ids in micro-batches exactly as the batch prediction of the same rows
does, with an id one passive party lacks answered by name; the pieces it rests on."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from vfl.contract.spec import TableSource, parse_spec
from vfl.contract.spec.predict import parse_predict_text
from vfl.party.config import parse_party_config
from vfl.party.datasets import Dataset
from vfl.party.errors import ConfigError, DataError
from vfl.party.inference.model import LoadedModel
from vfl.party.inference.rows import Rows, TableRows
from vfl.party.inference.session import ActiveSession, PassiveSession, SilentReporter
from vfl.party.state import StateDir
from vfl.secure.channel import InProcessHub, Mailbox
from vfl.secure.errors import PayloadError
from vfl.secure.wire.payload import ids_from_payload, ids_to_payload

from tests.support.data import FATE
from tests.support.harness import run_inprocess

LACKING = "133"  # a row the second passive party leaves out


@pytest.fixture(scope="module")
def three_parties(tmp_path_factory) -> tuple[dict, dict[str, StateDir]]:
    """The breast host columns split between s1 (x0-x9) and s2 (x10-x19, without row
    LACKING), a blindfl model trained on them, and their state directories."""
    root = tmp_path_factory.mktemp("three")
    rows = [r.split(",") for r in (FATE / "breast_hetero_host.csv").read_text().splitlines()]
    (root / "s1.csv").write_text("\n".join(",".join(r[:11]) for r in rows) + "\n")
    kept = [r for r in rows if r[0] != LACKING]
    (root / "s2.csv").write_text("\n".join(",".join([r[0], *r[11:]]) for r in kept) + "\n")
    datasets = {
        "bank": {"d": TableSource(path=str(FATE / "breast_hetero_guest.csv"), label="y")},
        "s1": {"d": TableSource(path=str(root / "s1.csv"))},
        "s2": {"d": TableSource(path=str(root / "s2.csv"))},
    }
    states = {p: StateDir.create(root / p) for p in datasets}
    spec = parse_spec(
        {
            "job": "three",
            "protocol": "blindfl",
            "crypto": {"key_bits": 512, "allow_insecure_test_keys": True},
            "parties": [
                {"id": "bank", "role": "active", "data": {"dataset": "d"}},
                {"id": "s1", "role": "passive", "data": {"dataset": "d"}},
                {"id": "s2", "role": "passive", "data": {"dataset": "d"}},
            ],
            "model": {"source": {"out_dim": 4}, "top": {"hidden": [8]}},
            "train": {"epochs": 1, "batch_size": 128, "checkpoint_every": 0},
            "validation": {"every": 1000},
        }
    )
    run_inprocess(spec, datasets, states=states)
    request = parse_predict_text("model: job\ndata: {bank: d, s1: d, s2: d}\n")
    run_inprocess(spec.for_prediction(request), datasets, states=states)
    return datasets, states


def batch_outputs(states: dict[str, StateDir]) -> dict[str, float]:
    text = (states["bank"].root / "predictions" / "predict.csv").read_text().splitlines()
    return {line.split(",")[0]: float(line.split(",")[1]) for line in text[1:]}


def test_a_session_scores_as_the_batch_prediction_and_names_a_lacking_party(
    three_parties,
) -> None:
    # Prepare: the three sides of one session, the passive ones serving in threads
    datasets, states = three_parties
    hub = InProcessHub()
    sides = {}
    for pid in ("bank", "s1", "s2"):
        model = LoadedModel.open(states[pid], "job", pid)
        rows = Rows.load(model, datasets[pid])
        channel = hub.channel(pid)
        scorer = model.scorer(channel, rows.inputs, SilentReporter(), 64, timeout_s=30)
        sides[pid] = (model, channel, scorer, rows)
    passives = [
        PassiveSession("s", m, ch, hub.mailboxes[pid], sc, rows)
        for pid, (m, ch, sc, rows) in sides.items()
        if pid != "bank"
    ]
    threads = [threading.Thread(target=p.serve) for p in passives]
    for t in threads:
        t.start()
    model, channel, scorer, rows = sides["bank"]
    active = ActiveSession("s", channel, scorer, {"s1": "-", "s2": "-"}, 30)
    expected = batch_outputs(states)
    # Execute: three micro-batches, one of them with the id s2 lacks
    batches = [["392", "18"], [LACKING, "405", "444"], ["18"]]
    outputs = [active.score(rows.find(ids)) for ids in batches]
    hub.close("done")
    for t in threads:
        t.join(10)
    # Assert
    task = model.manifest.task
    for ids, (out, lacking) in zip(batches, outputs, strict=True):
        scores = task.scores(out)["score"]
        for pos, i in enumerate(ids):
            if i == LACKING:
                assert lacking == {pos: ["s2"]}
            else:
                assert abs(scores[pos] - expected[i]) <= 1e-4
    assert [p.batches for p in passives] == [3, 3]
    active.close()


def test_rows_refuse_duplicate_ids_and_pad_lacking_ids_with_zeros(
    three_parties, tmp_path: Path
) -> None:
    datasets, states = three_parties
    model = LoadedModel.open(states["s1"], "job", "s1")
    rows = Rows.load(model, datasets["s1"])
    inputs, lacks = rows.find(["133", "nobody", "18"]).padded(["133", "nobody", "18"])
    assert inputs.rows == 3 and not inputs.x[1].any() and list(lacks) == [1]
    assert (inputs.x[0] == rows.inputs.x[rows.training.index["133"]]).all()
    lines = Path(datasets["s1"]["d"].path).read_text().splitlines()
    dup = tmp_path / "dup.csv"
    dup.write_text("\n".join([*lines, lines[3]]) + "\n")
    with pytest.raises(DataError, match="1 duplicate id"):
        TableRows.read(model, Dataset("dup", TableSource(path=str(dup))))


def test_ids_travel_as_their_own_payload_kind_with_checks() -> None:
    payload = ids_to_payload(["25115", "x-1"])
    assert payload.WhichOneof("kind") == "ids"
    assert ids_from_payload(payload, 2) == ["25115", "x-1"]
    with pytest.raises(PayloadError, match="at most 1 are scored"):
        ids_from_payload(payload, 1)
    with pytest.raises(PayloadError, match="empty or longer than 256"):
        ids_from_payload(ids_to_payload([""]), 5)


def test_a_long_lived_mailbox_forgets_its_oldest_tags() -> None:
    box = Mailbox(max_seen=2)
    for tag in ("a", "b", "c"):
        assert box.put("p", tag, b"x")
        box.get("p", tag, 1)
    assert not box.put("p", "c", b"x")  # remembered: a replay is dropped
    assert box.put("p", "a", b"x")  # forgotten


def test_scorers_in_the_party_config() -> None:
    config = parse_party_config({"party": "bank", "scorers": ["admin", "app"]}, Path("."))
    assert config.scorers == ("admin", "app")
    with pytest.raises(ConfigError, match="'scorers' must list"):
        parse_party_config({"party": "bank", "scorers": "admin"}, Path("."))


def test_rows_are_read_anew_only_when_their_file_changed_and_loads(
    three_parties, tmp_path: Path
) -> None:
    # Prepare: the bank's rows of a copy of its table
    datasets, states = three_parties
    model = LoadedModel.open(states["bank"], "job", "bank")
    table = tmp_path / "guest.csv"
    original = (FATE / "breast_hetero_guest.csv").read_text()
    table.write_text(original)
    mine = {"d": TableSource(path=str(table), label="y")}
    rows = Rows.load(model, mine)
    assert rows.refreshed(model) is rows  # unchanged: not read again
    # Execute / Assert: a half-written file keeps the rows until the file changes again
    table.write_text(original.splitlines()[0] + "\n133,1,0.5\n")
    kept = rows.refreshed(model)
    assert kept.training.index is rows.training.index
    assert kept.training.stamp != rows.training.stamp
    assert "its changed file did not load" in str(kept.problems()["d"])
    assert kept.refreshed(model) is kept
    # the whole file with one more person: read anew
    last = original.splitlines()[-1].split(",")
    table.write_text(original + ",".join(["new", *last[1:]]) + "\n")
    fresh = kept.refreshed(model)
    assert fresh.training.index["new"] == rows.training.rows
    assert fresh.inputs.rows == rows.training.rows + 1 and not fresh.problems()
