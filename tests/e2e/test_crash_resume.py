"""Crash-safe jobs with real processes: kill -9 a party daemon or the coordinator in the
middle of a split job (deterministic sync CELU schedule), start it again, resume: the job
ends SUCCEEDED with the weights and metrics of an uninterrupted run."""

from __future__ import annotations

import shutil
import signal
import time
from pathlib import Path

import pytest
import torch
import yaml
from vfl.contract.spec import parse_spec_text
from vfl.party.state import StateDir

from tests.support.data import FATE, breast_datasets_config
from tests.support.disk import fill, mount_tmpfs, scaled, unmount
from tests.support.jobs import checkpointed_breast_job
from tests.support.processes import Daemons

pytestmark = pytest.mark.subprocess

JOB = {
    **checkpointed_breast_job("crash", "breast", epochs=6),  # 48 rounds: killed at 20
    "network": {"bandwidth_mbps": 200, "rtt_ms": 40},  # ~40 ms a round: time to kill
}
DATASETS = breast_datasets_config()
SPEC_TEXT = yaml.safe_dump(JOB)


def start(workdir, auto_resume: bool = False, grace_s: float = 2.0, datasets=DATASETS) -> Daemons:
    workdir.mkdir(exist_ok=True)
    daemons = Daemons(workdir, grace_s=grace_s, auto_resume=auto_resume)
    daemons.start_coordinator()
    for party, given in datasets.items():
        daemons.start_party(party, given)
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


@pytest.mark.parametrize(
    "victim", ["shop", pytest.param("bank", marks=pytest.mark.slow), "coordinator"]
)
def test_a_killed_daemon_restarted_and_resumed_gives_the_uninterrupted_result(
    tmp_path, uninterrupted, victim
) -> None:
    """[bank] is in the slow tier: a killed party's pause, early resume naming it, restart
    and resume to the uninterrupted weights is the path [shop] proves in the default tier
    (the active party's restore of its top model, below the daemons: tests/party/
    test_checkpoints.py::test_a_resumed_split_job_ends_exactly_where_an_uninterrupted_one_ends)."""
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
        else:  # paused; a resume before the party is back names it and fails at once
            view = daemons.wait(job_id, lambda v: v.state != "TRAINING")
            assert view.state == "PAUSED" and f"vfl resume {job_id}" in view.reason
            early = daemons.vfl("resume", job_id)
            assert early.returncode == 2 and f"'{victim}'" in early.stderr, early.stderr
            assert "did not answer" in early.stderr
            daemons.start_party(victim, DATASETS[victim])
        view = daemons.wait(job_id, lambda v: v.state in ("PAUSED", "SUCCEEDED", "FAILED"))
        if victim != "coordinator":
            assert view.state == "PAUSED", view.reason
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


def test_a_planned_stop_pauses_the_job_at_once_saying_so_and_resume_finishes_it(
    tmp_path, uninterrupted
) -> None:
    # Prepare: a grace long enough that only the party's own word can pause the job soon
    whole, _ = uninterrupted
    daemons = start(tmp_path / "run", grace_s=60.0)
    try:
        with daemons.client() as client:
            job_id = client.submit(SPEC_TEXT)
        daemons.wait(job_id, lambda v: v.result.checkpoint_round >= 20)
        # Execute: the shop's operator stops its daemon (SIGTERM)
        shop = daemons.procs.pop("shop")
        shop.send_signal(signal.SIGTERM)
        stopped = time.monotonic()
        view = daemons.wait(job_id, lambda v: v.state != "TRAINING", timeout=30)
        paused_after = time.monotonic() - stopped
        # Assert: paused at once, for what happened (not a party that stopped answering)
        assert view.state == "PAUSED", view.reason
        assert paused_after < 15, paused_after
        assert view.reason.startswith(
            "party 'shop' stopped: its operator stopped the daemon (SIGTERM); every party has "
            "checkpointed round"
        ), view.reason
        assert "stopped answering" not in view.reason and f"vfl resume {job_id}" in view.reason
        assert shop.wait(30) == 0
        # Execute: the shop is back; resume
        daemons.start_party("shop", DATASETS["shop"])
        out = daemons.vfl("resume", job_id, "--wait")
        # Assert
        assert out.returncode == 0, out.stderr + daemons.logs()
        view = daemons.wait(job_id, lambda v: v.state in ("SUCCEEDED", "FAILED"))
        assert view.state == "SUCCEEDED", view.reason
        assert view.result.metrics["auc"] == pytest.approx(whole.result.metrics["auc"], abs=1e-6)
    finally:
        daemons.stop()


@pytest.mark.slow  # ~30 s: it waits out a 20 s grace
def test_a_party_killed_and_restarted_within_the_grace_is_named_as_restarted(tmp_path) -> None:
    # Prepare: a grace the restarted daemon is back within
    daemons = start(tmp_path / "run", grace_s=20.0)
    try:
        with daemons.client() as client:
            job_id = client.submit(SPEC_TEXT)
        daemons.wait(job_id, lambda v: v.result.checkpoint_round >= 10)
        # Execute: kill -9, then start it again at once
        daemons.kill("shop")
        daemons.start_party("shop", DATASETS["shop"])
        view = daemons.wait(job_id, lambda v: v.state != "TRAINING", timeout=60)
        # Assert: the reason says it restarted, not that it may have been
        assert view.state == "PAUSED", view.reason
        assert view.reason.startswith("party 'shop' restarted during the job (its daemon is up")
        assert "it was stopped or crashed" in view.reason and "?" not in view.reason
    finally:
        daemons.stop()


def test_a_coordinator_killed_while_parties_load_pauses_the_job_after_its_restart(
    tmp_path,
) -> None:
    # Prepare: the shop's table has 30,000 more columns: seconds to load
    rows = (FATE / "breast_hetero_host.csv").read_text().splitlines()
    wide = tmp_path / "wide.csv"
    ones = "," + ",".join(["1"] * 30_000)
    header = rows[0] + "," + ",".join(f"w{i}" for i in range(30_000))
    wide.write_text("\n".join([header, *(r + ones for r in rows[1:])]) + "\n")
    datasets = {**DATASETS, "shop": {"breast": {"path": str(wide)}}}
    workdir = tmp_path / "run"
    workdir.mkdir()
    daemons = Daemons(workdir)
    daemons.start_coordinator()
    for party, party_datasets in datasets.items():
        daemons.start_party(party, party_datasets)
    port = int(daemons.address.rsplit(":", 1)[1])
    try:
        with daemons.client() as client:
            job_id = client.submit(SPEC_TEXT)
        daemons.wait(job_id, lambda v: v.state == "ALIGNING")
        # Execute: kill -9 the coordinator while the shop loads, then start it again
        daemons.kill("coordinator")
        daemons.start_coordinator(port)
        view = daemons.wait(job_id, lambda v: v.state != "ALIGNING", timeout=60)
        # Assert: paused, not stuck; no party keeps the prepared job and its table
        assert view.state == "PAUSED", view.reason
        assert "coordinator restarted" in view.reason and f"vfl resume {job_id}" in view.reason
        out = daemons.vfl("resume", job_id, "--wait")
        assert out.returncode == 0, out.stderr + daemons.logs()
        assert "SUCCEEDED" in out.stdout
    finally:
        daemons.stop()


def test_four_concurrent_jobs_one_party_killed_all_resume_to_their_alone_metrics(
    tmp_path,
) -> None:
    # Prepare: four jobs (other seeds, other names), first each alone
    specs = [
        yaml.safe_dump({**JOB, "job": f"c{i}", "train": {**JOB["train"], "seed": i, "epochs": 4}})
        for i in range(4)
    ]
    daemons = start(tmp_path / "run")
    try:
        with daemons.client() as client:
            alone = []
            for text in specs:
                view = daemons.wait(
                    client.submit(text), lambda v: v.state in ("SUCCEEDED", "FAILED")
                )
                assert view.state == "SUCCEEDED", view.reason
                alone.append(dict(view.result.metrics))
            # Execute: all four at once; kill -9 the shop once every job has a checkpoint
            jobs = [client.submit(text) for text in specs]
        for job_id in jobs:
            daemons.wait(
                job_id, lambda v: v.result.checkpoint_round >= 10 or v.state == "SUCCEEDED"
            )
        daemons.kill("shop")
        daemons.start_party("shop", DATASETS["shop"])
        for job_id in jobs:
            view = daemons.wait(job_id, lambda v: v.state in ("PAUSED", "SUCCEEDED", "FAILED"))
            if view.state == "PAUSED":
                out = daemons.vfl("resume", job_id)
                assert out.returncode == 0, out.stderr
        # Assert: every job ends with the metrics it gets alone
        for job_id, metrics in zip(jobs, alone, strict=True):
            view = daemons.wait(job_id, lambda v: v.state in ("SUCCEEDED", "FAILED"))
            assert view.state == "SUCCEEDED", view.reason
            for name, value in metrics.items():
                assert abs(view.result.metrics[name] - value) <= 1e-6, (job_id, name)
    finally:
        daemons.stop()


def test_auto_resume_continues_a_paused_job_once_its_party_is_back(tmp_path, uninterrupted) -> None:
    whole, _ = uninterrupted
    daemons = start(tmp_path / "run", auto_resume=True)
    try:
        with daemons.client() as client:
            job_id = client.submit(SPEC_TEXT)
        daemons.wait(job_id, lambda v: v.result.checkpoint_round >= 20)
        daemons.kill("shop")
        daemons.wait(job_id, lambda v: v.state == "PAUSED")
        daemons.start_party("shop", DATASETS["shop"])
        view = daemons.wait(job_id, lambda v: v.state in ("SUCCEEDED", "FAILED"))
        assert view.state == "SUCCEEDED" and view.result.resumed_from >= 20, view.reason
        assert view.result.metrics["auc"] == pytest.approx(whole.result.metrics["auc"], abs=1e-6)
    finally:
        daemons.stop()


def copied_datasets(tmp_path) -> dict[str, dict[str, dict]]:
    """DATASETS with the shop's table copied to `tmp_path` (a test may change it)."""
    source = DATASETS["shop"]["breast"]["path"]
    copy = tmp_path / "shop.csv"
    shutil.copyfile(source, copy)
    return {**DATASETS, "shop": {"breast": {**DATASETS["shop"]["breast"], "path": str(copy)}}}


def test_a_resume_on_changed_values_pauses_naming_the_party_and_resumes_once_put_back(
    tmp_path, uninterrupted
) -> None:
    # Prepare: kill -9 the shop in the middle of training
    whole, _ = uninterrupted
    datasets = copied_datasets(tmp_path)
    table = Path(datasets["shop"]["breast"]["path"])
    original = table.read_text()
    daemons = start(tmp_path / "run", datasets=datasets)
    try:
        with daemons.client() as client:
            job_id = client.submit(SPEC_TEXT)
        daemons.wait(job_id, lambda v: v.result.checkpoint_round >= 20)
        daemons.kill("shop")
        daemons.wait(job_id, lambda v: v.state == "PAUSED")
        # Execute: the same ids with other values (one column scaled), then resume
        table.write_text(scaled(original))
        daemons.start_party("shop", datasets["shop"])
        assert daemons.vfl("resume", job_id).returncode == 0
        view = daemons.wait(job_id, lambda v: v.state in ("PAUSED", "FAILED", "SUCCEEDED"))
        # Assert: paused, not trained on; named for the party and the fix, no path
        assert view.state == "PAUSED", view.reason
        assert view.reason.startswith("party 'shop': its rows hold other values"), view.reason
        assert "put back the data the job began with" in view.reason
        assert str(table) not in view.reason and "party 'shop': party" not in view.reason
        # Execute: the data put back, resume again
        table.write_text(original)
        assert daemons.vfl("resume", job_id).returncode == 0
        view = daemons.wait(job_id, lambda v: v.state in ("PAUSED", "FAILED", "SUCCEEDED"))
        # Assert: the uninterrupted run's result
        assert view.state == "SUCCEEDED", view.reason
        assert view.result.metrics["auc"] == pytest.approx(whole.result.metrics["auc"], abs=1e-6)
    finally:
        daemons.stop()


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MB tmpfs as the shop's state directory (root only; skipped with why elsewhere)."""
    mount = tmp_path / "run" / "shop-state"
    problem = mount_tmpfs(mount)
    if problem is not None:
        pytest.skip(f"cannot mount a tmpfs for the full disk ({problem}): needs root")
    yield mount
    unmount(mount)


def test_a_full_disk_at_a_checkpoint_pauses_naming_it_and_resumes_once_there_is_room(
    tmp_path, uninterrupted, small_disk
) -> None:
    # Prepare: the shop's state directory on a small disk, filled once training runs
    whole, _ = uninterrupted
    daemons = start(tmp_path / "run")
    try:
        with daemons.client() as client:
            job_id = client.submit(SPEC_TEXT)
        daemons.wait(job_id, lambda v: v.result.checkpoint_round >= 20)
        # Execute
        filler = fill(small_disk)
        view = daemons.wait(job_id, lambda v: v.state in ("PAUSED", "FAILED", "SUCCEEDED"))
        # Assert: paused, naming the party and the disk, not its path
        assert view.state == "PAUSED", view.reason
        assert view.reason.startswith("party 'shop': its checkpoint of round"), view.reason
        assert "the disk of its state directory is full; free space there" in view.reason
        assert str(small_disk) not in view.reason
        # the daemon is up and its last checkpoints are whole
        assert daemons.procs["shop"].poll() is None
        # Execute: room again; resume
        filler.unlink()
        out = daemons.vfl("resume", job_id)
        assert out.returncode == 0, out.stderr
        view = daemons.wait(job_id, lambda v: v.state in ("PAUSED", "FAILED", "SUCCEEDED"))
        # Assert: the uninterrupted run's result
        assert view.state == "SUCCEEDED", view.reason + daemons.logs()
        assert view.reason == "every party finished"  # not the reason of its last wait
        assert view.result.metrics["auc"] == pytest.approx(whole.result.metrics["auc"], abs=1e-6)
    finally:
        daemons.stop()
