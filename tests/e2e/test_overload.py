"""A burst of online `Predict` calls while a training job runs on the same daemons (each a
`vfl ... serve` process), from one client process.

With the default `scoring:` a burst of several hundred split calls is all scored: calls
are admitted into the model's micro-batches as far as those can score them in time, not
as far as a count of threads or queued requests goes. With small bounds (16 calls held,
8 queued) a burst of 200 is overload, refused, never collapsed: every call is answered
within 2 s, with a score or RESOURCE_EXHAUSTED and a retry hint. Either way every score
is the batch prediction's (`vfl predict`) for that id and the training job SUCCEEDS
without pausing. (bench/overload.py: 1,000 calls, both protocols, and the latencies.)"""

from __future__ import annotations

import csv
import threading
import time

import grpc
import pytest
import yaml
from vfl.cli.main import main

from tests.support.data import FATE, breast_datasets_config
from tests.support.jobs import checkpointed_breast_job
from tests.support.metrics import endpoint, scrape
from tests.support.processes import Daemons
from tests.support.scoring_load import StateLog, batch_scores, burst

pytestmark = [pytest.mark.subprocess, pytest.mark.alone]

CALLS = 200
BURST = 300  # a burst the default capacity scores in full
ANSWER_S = 2.0  # every call is answered (scored or refused) within this
TOL = 1e-5  # an online score against the batch one (float32 forwards of other batch sizes)
SCORING = {"threads": 16, "queue": 8}  # the tight bank's: a burst of 200 must overflow it
MODEL = {
    "job": "model",
    "parties": [
        {"id": "bank", "role": "active", "data": {"dataset": "breast"}},
        {"id": "shop", "role": "passive", "data": {"dataset": "breast"}},
    ],
    "model": {"source": {"out_dim": 4}, "top": {"hidden": [8]}},
    "train": {"epochs": 1, "batch_size": 64},
    "validation": {"every": 1000},
}
TRAINING = {  # ~40 ms a round: the job trains for seconds, through the burst
    **checkpointed_breast_job("training", "breast", epochs=10),
    "network": {"bandwidth_mbps": 200, "rtt_ms": 40},
}


def ids() -> list[str]:
    with (FATE / "breast_hetero_guest.csv").open() as fh:
        return [row["id"] for row in csv.DictReader(fh)]


def start(tmp_path_factory, scoring: dict | None):
    """The daemons (the parties with `scoring:` in their configs, if given), with a split
    model trained and its batch prediction's scores."""
    workdir = tmp_path_factory.mktemp("overload") / "run"
    workdir.mkdir()
    daemons = Daemons(workdir)
    daemons.start_coordinator()
    ports = {}
    for party, datasets in breast_datasets_config().items():
        body = {"party": party, "coordinator": daemons.address, "datasets": datasets}
        body.update({"scoring": scoring} if scoring else {})
        (workdir / f"{party}.yaml").write_text(yaml.safe_dump(body))
        ports[party] = daemons.start_party(party, datasets, flags=("--metrics", "127.0.0.1:0"))
    try:
        with daemons.client() as client:
            model = client.submit(yaml.safe_dump(MODEL))
            view = daemons.wait(model, lambda v: v.state in ("SUCCEEDED", "FAILED"))
            assert view.state == "SUCCEEDED", view.reason
            expected = batch_scores(client, model, workdir / "bank-state" / "predictions")
        bank = f"127.0.0.1:{ports['bank']}"
        burst(bank, model, ids()[:1], 1)  # loads the model and opens its session
        yield daemons, bank, model, expected
    finally:
        daemons.stop()


@pytest.fixture(scope="module")
def roomy(tmp_path_factory):
    """The federation with every party's default `scoring:`."""
    yield from start(tmp_path_factory, None)


@pytest.fixture(scope="module")
def federation(tmp_path_factory):
    """The federation with the tight bounds `SCORING`."""
    yield from start(tmp_path_factory, SCORING)


def burst_during_training(daemons: Daemons, bank: str, model: str, calls: int):
    """A training job started, then a burst of `calls` Predict calls once it trains: the
    burst's outcomes, the job's state right after it, and every state the job went
    through until it ended."""
    with daemons.client() as client:
        job_id = client.submit(yaml.safe_dump(TRAINING))
    daemons.wait(job_id, lambda v: v.state == "TRAINING")
    states = StateLog(daemons.address, job_id)
    outcomes = burst(bank, model, ids(), calls)
    with daemons.client() as client:
        during = client.get(job_id).state
        seen = states.wait(timeout=180)
        resumed = client.get(job_id).result.resumed_from
    return outcomes, during, seen, resumed


def test_a_burst_of_split_predicts_during_training_is_all_scored(roomy) -> None:
    # Prepare
    daemons, bank, model, expected = roomy
    # Execute: a training job, and BURST calls at once while it trains (with the former
    # default bounds, 32 calls held and 32 queued, most of them were refused)
    outcomes, during, seen, resumed = burst_during_training(daemons, bank, model, BURST)
    # Assert: every call scored, with the batch prediction's score
    assert len(outcomes) == BURST
    unscored = [(o.code, o.details) for o in outcomes if o.code != grpc.StatusCode.OK]
    assert not unscored, (len(unscored), unscored[:3])
    assert all(o.score is not None for o in outcomes), [o for o in outcomes if o.score is None]
    wrong = [
        (o.id, o.score, expected[o.id]) for o in outcomes if abs(o.score - expected[o.id]) > TOL
    ]
    assert not wrong, wrong
    refused = scrape(endpoint(daemons.workdir, "bank"))
    assert not [v for k, v in refused.items() if k[0] == "vfl_party_refused_total" and v], refused
    # Assert: the job trained through the burst, never paused, and succeeded
    assert during == "TRAINING", seen
    assert seen[-1] == "SUCCEEDED" and "PAUSED" not in seen, (seen, daemons.logs())
    assert resumed == 0


def test_a_burst_of_predicts_is_answered_or_refused_at_once_and_training_succeeds(
    federation,
) -> None:
    # Prepare
    daemons, bank, model, expected = federation
    # Execute: a training job, and CALLS calls at once while it trains
    outcomes, during, seen, resumed = burst_during_training(daemons, bank, model, CALLS)
    # Assert: every call answered at once, with a right score or a refusal and its hint
    assert len(outcomes) == CALLS
    answers = {grpc.StatusCode.OK, grpc.StatusCode.RESOURCE_EXHAUSTED}
    others = [(o.code, o.details) for o in outcomes if o.code not in answers]
    assert not others, others
    slowest = max(o.seconds for o in outcomes)
    assert slowest <= ANSWER_S, slowest
    scored = [o for o in outcomes if o.code == grpc.StatusCode.OK]
    refused = [o for o in outcomes if o.code == grpc.StatusCode.RESOURCE_EXHAUSTED]
    assert scored and refused, (len(scored), len(refused))
    assert all(o.score is not None for o in scored), [o for o in scored if o.score is None]
    wrong = [(o.id, o.score, expected[o.id]) for o in scored if abs(o.score - expected[o.id]) > TOL]
    assert not wrong, wrong
    for o in refused:
        assert o.retry_after_s is not None and o.retry_after_s > 0, o
        assert "party 'bank'" in o.details and "retry in" in o.details, o.details
    # Assert: the bank's metrics counted each refusal, by where (threads, a model's queue
    # or what its micro-batches can score in time)
    counted = scrape(endpoint(daemons.workdir, "bank"))
    at = {dict(k[1])["at"]: v for k, v in counted.items() if k[0] == "vfl_party_refused_total"}
    assert sum(at.values()) == len(refused), at
    assert set(at) <= {"scoring", "model queue", "model capacity"}, at
    # Assert: the job trained through the burst, never paused, and succeeded
    assert during == "TRAINING", seen
    assert seen[-1] == "SUCCEEDED" and "PAUSED" not in seen, (seen, daemons.logs())
    assert resumed == 0


def test_vfl_score_names_a_refusal_and_when_to_retry(federation, capsys) -> None:
    # Prepare: bursts of 200 calls keep the bank's scoring plane full
    daemons, bank, model, _ = federation
    stop = threading.Event()

    def load() -> None:
        while not stop.is_set():
            burst(bank, model, ids(), CALLS)

    loader = threading.Thread(target=load, daemon=True)
    loader.start()
    # Execute: `vfl score` meanwhile, until one is refused
    codes, deadline = [], time.monotonic() + 30
    try:
        while time.monotonic() < deadline and 3 not in codes:
            args = ["score", model, "--id", "133", "--party", bank]
            codes.append(main([*args, "--coordinator", daemons.address]))
    finally:
        stop.set()
        loader.join(60)
    # Assert: refused at once with exit 3, the party, its bound and when to retry
    err = capsys.readouterr().err
    assert 3 in codes and set(codes) <= {0, 3}, (codes, err)
    assert "error: party 'bank'" in err and "retry in" in err, err
    assert (
        "holds 16 online scoring calls at once (its config's scoring.threads)" in err
        or ("has 8 requests waiting for model" in err and "scoring.queue" in err)
        or ("cannot score one more request for model" in err and "scoring.deadline_s" in err)
    ), err
