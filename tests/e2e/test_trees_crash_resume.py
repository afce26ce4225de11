"""A secureboost tree job with real processes and full-size (2048-bit) keys: kill -9 the
passive party's daemon in the middle of training (checkpoints after every round, the
keys in them), start it again, resume: the job ends SUCCEEDED with the model of an
uninterrupted run, at both parties, so it predicts as that run's model does."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from vfl.party.state import StateDir
from vfl.party.state.model_store import ModelStore

from tests.support.data import breast_datasets_config
from tests.support.processes import Daemons

pytestmark = [pytest.mark.subprocess, pytest.mark.slow]

JOB = {
    "job": "trees-crash",
    "parties": [
        {"id": "bank", "role": "active", "data": {"dataset": "breast"}},
        {"id": "shop", "role": "passive", "data": {"dataset": "breast"}},
    ],
    "model": {"trees": {"count": 16, "depth": 3, "subsample": 0.8}},
    "protocol": "secureboost",
    "network": {"bandwidth_mbps": 200, "rtt_ms": 40},  # ~0.3 s a round: time to kill
}
DATASETS = breast_datasets_config()


def start(workdir) -> Daemons:
    workdir.mkdir()
    daemons = Daemons(workdir)
    daemons.start_coordinator()
    for party, datasets in DATASETS.items():
        daemons.start_party(party, datasets)
    return daemons


def parts(workdir, job_id: str) -> dict[str, dict]:
    """Each party's model part."""
    return {p: ModelStore(StateDir(workdir / f"{p}-state")).load(job_id, p)[1] for p in DATASETS}


def assert_same(a, b, where: str = "") -> None:
    if isinstance(a, dict):
        assert set(a) == set(b), where
        for key in a:
            assert_same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, np.ndarray):
        assert np.array_equal(a, b), where
    else:
        assert a == b, where


def test_a_killed_passive_party_resumed_gives_the_uninterrupted_model(tmp_path) -> None:
    # Prepare: an uninterrupted run
    spec = yaml.safe_dump(JOB)
    whole = start(tmp_path / "whole")
    try:
        with whole.client() as client:
            whole_id = client.submit(spec)
        done = whole.wait(whole_id, lambda v: v.state in ("SUCCEEDED", "FAILED"))
        assert done.state == "SUCCEEDED", done.reason
    finally:
        whole.stop()
    daemons = start(tmp_path / "run")
    try:
        with daemons.client() as client:
            job_id = client.submit(spec)
        daemons.wait(job_id, lambda v: v.result.checkpoint_round >= 5)
        # Execute: kill -9 the shop mid-job, start it again, resume
        daemons.kill("shop")
        view = daemons.wait(job_id, lambda v: v.state != "TRAINING")
        assert view.state == "PAUSED", view.reason
        daemons.start_party("shop", DATASETS["shop"])
        out = daemons.vfl("resume", job_id)
        assert out.returncode == 0, out.stderr
        view = daemons.wait(job_id, lambda v: v.state in ("SUCCEEDED", "FAILED"))
        # Assert: resumed from a checkpoint, the same metrics and the same model parts
        assert view.state == "SUCCEEDED", view.reason + daemons.logs()
        assert view.result.resumed_from >= 5
        assert dict(view.result.metrics) == dict(done.result.metrics)
        for party, part in parts(tmp_path / "run", job_id).items():
            assert_same(parts(tmp_path / "whole", whole_id)[party], part, party)
    finally:
        daemons.stop()
