"""Crash-safe jobs with real processes: kill -9 a party daemon or the coordinator in the
middle of a split job (deterministic sync CELU schedule), start it again, resume: the job
ends SUCCEEDED with the weights and metrics of an uninterrupted run."""

from __future__ import annotations

import pytest
import torch
import yaml

from coordinator.spec import parse_spec_text
from party.state import StateDir
from tests.support.data import breast_datasets_config
from tests.support.processes import Daemons

pytestmark = pytest.mark.subprocess

JOB = {
    "job": "crash",
    "parties": [
        {"id": "bank", "role": "active", "data": {"dataset": "breast"}},
        {"id": "shop", "role": "passive", "data": {"dataset": "breast"}},
    ],
    "model": {"source": {"out_dim": 8}, "top": {"hidden": [16]}},
    "local_updates": {"mode": "celu", "workset": 4, "reuse": 3, "schedule": "sync"},
    "train": {"epochs": 10, "batch_size": 64, "checkpoint_every": 10},
    "validation": {"every": 10},
    "network": {"bandwidth_mbps": 200, "rtt_ms": 40},  # ~40 ms a round: time to kill
}
DATASETS = breast_datasets_config()
SPEC_TEXT = yaml.safe_dump(JOB)


def start(workdir) -> Daemons:
    workdir.mkdir()
    daemons = Daemons(workdir)
    daemons.start_coordinator()
    for party, datasets in DATASETS.items():
        daemons.start_party(party, datasets)
    return daemons


def final_weights(workdir, party: str, job_id: str) -> dict[str, torch.Tensor]:
    state = StateDir(workdir / f"{party}-state")
    spec = parse_spec_text(SPEC_TEXT)
    ck = state.load(job_id, state.rounds(job_id)[-1], spec.spec_hash(), party)
    trainer = ck.state["trainer"]
    return {
        f"{part}.{k}": v
        for part in ("top", "bottom")
        if trainer.get(part)
        for k, v in trainer[part].items()
    }


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("whole") / "run"
    daemons = start(workdir)
    try:
        with daemons.client() as client:
            job_id = client.submit(SPEC_TEXT)
        view = daemons.wait(job_id, lambda v: v.state in ("SUCCEEDED", "FAILED"))
        assert view.state == "SUCCEEDED", view.reason
        return view, {p: final_weights(workdir, p, job_id) for p in DATASETS}
    finally:
        daemons.stop()


@pytest.mark.parametrize("victim", ["shop", "bank", "coordinator"])
def test_a_killed_daemon_restarted_and_resumed_gives_the_uninterrupted_result(
    tmp_path, uninterrupted, victim
) -> None:
    # Prepare
    whole, whole_weights = uninterrupted
    daemons = start(tmp_path / "run")
    try:
        with daemons.client() as client:
            job_id = client.submit(SPEC_TEXT)
        daemons.wait(job_id, lambda v: v.result.checkpoint_round >= 20)
        # Execute: kill -9 in the middle of training, start it again
        port = int(daemons.address.rsplit(":", 1)[1])
        daemons.kill(victim)
        if victim == "coordinator":
            daemons.start_coordinator(port)
        else:
            daemons.start_party(victim, DATASETS[victim])
        view = daemons.wait(job_id, lambda v: v.state in ("PAUSED", "SUCCEEDED", "FAILED"))
        if victim != "coordinator":
            assert view.state == "PAUSED", view.reason
            assert f"vfl resume {job_id}" in view.reason
        if view.state == "PAUSED":
            out = daemons.vfl("resume", job_id)
            assert out.returncode == 0, out.stderr
            assert "continuing after round" in out.stderr
        view = daemons.wait(job_id, lambda v: v.state in ("SUCCEEDED", "FAILED"))
        # Assert
        assert view.state == "SUCCEEDED", view.reason + daemons.logs()
        for metric, value in whole.result.metrics.items():
            assert abs(view.result.metrics[metric] - value) <= 1e-6, metric
        for party in DATASETS:
            weights = final_weights(tmp_path / "run", party, job_id)
            for name, tensor in whole_weights[party].items():
                assert torch.allclose(weights[name], tensor, rtol=0, atol=1e-6), (party, name)
    finally:
        daemons.stop()
