"""A party whose heavy Paillier work runs on its own Ray cluster: a real two-node cluster
(`ray start --head` and `ray start --address`, one CPU each) on this machine, and a
`blindfl` job with the active party on Ray and the passive one local.

"Identical": with both parties' key pairs pinned, a party's initial shares come from the
job seed and its private key, so the only randomness left is that of masks and
obfuscators, which never change a decrypted value (every masked value is unmasked
exactly, in integers). Decryptions and products return the same integers wherever they
run, so the metrics are equal exactly, not merely close.

Skipped with the reason where Ray is not installed (CI: it is the optional `ray` extra)
or cannot start a cluster (about 25 s here: a cluster start and three one-epoch runs)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import yaml
from vfl.contract.spec import parse_spec
from vfl.coordinator.client import JobView
from vfl.party.errors import JobError
from vfl.secure.errors import PayloadError
from vfl.secure.executor import RayExecutor, Shared
from vfl.secure.paillier.engine import Paillier
from vfl.secure.paillier.obfuscators import ObfuscatorPool
from vfl.secure.psi.curve import Blinder, blind_blob, hash_to_curve

from tests.support.blindfl_keys import new_keys, pin_keys
from tests.support.data import breast, breast_datasets_config
from tests.support.harness import run_inprocess
from tests.support.processes import Daemons
from tests.support.proctree import alive, describe, in_session, tree, wait_gone
from tests.support.ray_cluster import LocalRayCluster, ray_missing

MISSING = ray_missing()
pytestmark = pytest.mark.skipif(MISSING is not None, reason=str(MISSING))
TEST_CRYPTO = {"key_bits": 512, "allow_insecure_test_keys": True}  # INSECURE test keys
# small tasks, so that a 512-bit test job sends many to the cluster: 0.35 ms of work is 9
# decryptions, 14 table re-randomisations or 312 product terms per task at 512 bits
MIN_TASK_MS = 0.35


def spec():
    return parse_spec(
        {
            "job": "ray",
            "protocol": "blindfl",
            "crypto": TEST_CRYPTO,
            "parties": [
                {"id": "bank", "role": "active", "data": {"dataset": "d"}},
                {"id": "shop", "role": "passive", "data": {"dataset": "d"}},
            ],
            "model": {"source": {"out_dim": 4}, "top": {"hidden": [8]}},
            "train": {"epochs": 1, "batch_size": 64, "lr": 0.05, "seed": 3},
            "validation": {"fraction": 0.3, "every": 1000},
        }
    )


@pytest.fixture(scope="module")
def cluster():
    nodes = LocalRayCluster(workers=1)
    try:
        nodes.start()
    except (RuntimeError, OSError) as exc:
        nodes.stop()
        pytest.skip(f"Ray cannot start a cluster on this machine: {exc}")
    yield nodes
    nodes.stop()


@pytest.fixture(scope="module")
def keys():
    return new_keys(["bank", "shop"], TEST_CRYPTO["key_bits"])


@pytest.fixture(scope="module")
def all_local(keys):
    with pytest.MonkeyPatch.context() as mp:
        pin_keys(mp, keys)
        return run_inprocess(spec(), breast())


def run_with(executor: RayExecutor, keys, monkeypatch) -> dict[str, dict]:
    pin_keys(monkeypatch, keys)
    try:
        return run_inprocess(spec(), breast(), executors={"bank": executor})
    finally:
        executor.close()


def test_a_party_on_ray_trains_what_the_all_local_run_trains(
    cluster, keys, all_local, monkeypatch
) -> None:
    executor = RayExecutor(cluster.address, MIN_TASK_MS)
    result = run_with(executor, keys, monkeypatch)
    assert executor.slots == 2  # the head's CPU and the worker node's
    assert executor.tasks >= 10  # decryptions and products went to the cluster
    assert result["bank"]["metrics"] == all_local["bank"]["metrics"]
    assert result["bank"]["metrics"]["auc"] > 0.7  # one epoch; it varies with the keys
    assert list(result["bank"]["validation_ids"]) == list(all_local["bank"]["validation_ids"])


def test_rerandomisations_run_on_the_cluster_from_the_table_shipped_once(cluster, keys) -> None:
    owner = keys["shop"]
    he = Paillier(owner.public, owner.private, threads=1)
    pool = ObfuscatorPool(owner.public, None, 0, 1, False)  # a peer's pool, nothing ready
    pool.prepare()
    executor = RayExecutor(cluster.address, MIN_TASK_MS)
    try:
        peer = Paillier(owner.public, None, pool, threads=1, executor=executor)
        values = list(range(-40, 40))
        cts = he.encrypt(values)
        fresh = peer.rerandomize(cts)
        again = peer.rerandomize(fresh)
        assert executor.tasks == 4  # 80 over 2 slots, twice: one table in the object store
        assert he.decrypt(fresh) == he.decrypt(again) == values
        assert set(fresh).isdisjoint(cts) and set(again).isdisjoint(fresh)
    finally:
        executor.close()


def test_psi_points_are_blinded_on_the_cluster(cluster) -> None:
    executor = RayExecutor(cluster.address, 0.5)  # 16 points per task
    points = hash_to_curve([str(i).encode() for i in range(100)]).tobytes()
    try:
        with Blinder(executor=executor) as blinder:
            spread = b"".join(blinder.stream([points[:1600], points[1600:]]))
            assert executor.tasks == 4  # 2 chunks of 50 points, 2 slots
            assert spread == blind_blob(blinder._secret, points)  # noqa: SLF001
            with pytest.raises(PayloadError, match="small order"):
                list(blinder.stream([bytes(32) * 40]))  # the worker's ValueError
    finally:
        executor.close()


class KillingExecutor(RayExecutor):
    """Kills every worker process of the cluster right after its `at`-th map submitted
    its tasks, before their results are read."""

    def __init__(self, cluster: LocalRayCluster, at: int) -> None:
        super().__init__(cluster.address, MIN_TASK_MS, max_retries=3)
        self.cluster, self.at, self.maps, self.killed = cluster, at, 0, 0

    def map(self, fn: Callable[[Any, Any], Any], shared: Shared[Any], blocks: Sequence[Any]):
        refs = self.submit(fn, shared, blocks)
        self.maps += 1
        if self.maps == self.at:
            self.killed = self.cluster.kill_workers()
        return self.gather(refs)


def test_killing_the_ray_workers_mid_job_does_not_fail_it(
    cluster, keys, all_local, monkeypatch
) -> None:
    executor = KillingExecutor(cluster, at=3)
    result = run_with(executor, keys, monkeypatch)
    assert executor.killed >= 1 and executor.maps > 3
    assert result["bank"]["metrics"] == all_local["bank"]["metrics"]


def test_an_unreachable_cluster_fails_the_job_before_training(keys, monkeypatch) -> None:
    executor = RayExecutor("127.0.0.1:1", MIN_TASK_MS)  # nothing listens on port 1
    with pytest.raises(JobError, match="party 'bank': the party's Ray cluster .* cannot be"):
        run_with(executor, keys, monkeypatch)


def submitted(tmp_path, compute: dict, epochs: int = 1) -> tuple[Daemons, str]:
    """`vfl party serve` daemons, bank's config with `compute`, running a blindfl breast
    job of `epochs`: the daemons (to stop) and the job's id."""
    daemons = Daemons(tmp_path)
    daemons.start_coordinator()
    datasets = breast_datasets_config()
    body = {"party": "bank", "coordinator": daemons.address, "datasets": datasets["bank"]}
    (tmp_path / "bank.yaml").write_text(yaml.safe_dump({**body, "compute": compute}))
    try:
        for party in ("bank", "shop"):
            daemons.start_party(party, datasets[party])
        job = spec().model_dump(mode="json")
        job["train"]["epochs"] = epochs
        for p in job["parties"]:
            p["data"] = {"dataset": "breast"}
        with daemons.client() as client:
            return daemons, client.submit(yaml.safe_dump(job))
    except BaseException:
        daemons.stop()
        raise


def daemon_job(tmp_path, compute: dict, predict: bool = False) -> tuple[JobView, str]:
    """A one-epoch blindfl breast job between `vfl party serve` daemons, bank's config
    with `compute` (with `predict`, then `vfl predict` with its model); the job's end and
    bank's log."""
    daemons, job_id = submitted(tmp_path, compute)
    try:
        view = daemons.wait(job_id, lambda v: v.state in ("SUCCEEDED", "FAILED"))
        if predict and view.state == "SUCCEEDED":
            scored = daemons.vfl(
                "predict", job_id, "--data", "bank=breast", "--data", "shop=breast"
            )
            assert scored.returncode == 0, scored.stderr
    finally:
        daemons.stop()
    return view, (tmp_path / "bank.log").read_text()


@pytest.mark.subprocess
def test_a_daemon_whose_config_names_its_cluster_runs_its_work_there(cluster, tmp_path) -> None:
    compute = {"executor": "ray", "address": cluster.address, "min_task_ms": MIN_TASK_MS}
    view, log = daemon_job(tmp_path, compute, predict=True)
    assert view.state == "SUCCEEDED", view.reason
    assert "joined the Ray cluster" in log
    tasks = [int(t) for t in re.findall(r"ray executor, (\d+) tasks", log)]
    assert len(tasks) == 2 and 10 <= tasks[0] < tasks[1]  # training, then prediction


@pytest.mark.subprocess
def test_a_daemon_whose_cluster_is_down_fails_the_job_at_prepare(tmp_path) -> None:
    view, _ = daemon_job(tmp_path, {"executor": "ray", "address": "127.0.0.1:1"})
    assert view.state == "FAILED"
    assert "party 'bank'" in view.reason and "Ray cluster" in view.reason
    assert "127.0.0.1:1" not in view.reason  # the cluster's address stays at the party


@pytest.mark.subprocess
def test_a_killed_daemon_leaves_no_driver_and_its_ray_workers_end(cluster, tmp_path) -> None:
    # Prepare: bank's Paillier work on the cluster, in a job long enough to kill mid-run
    known = set(cluster.worker_pids())  # the workers of this test process's own driver
    compute = {"executor": "ray", "address": cluster.address, "min_task_ms": MIN_TASK_MS}
    daemons, job_id = submitted(tmp_path, compute, epochs=8)
    try:
        daemons.wait(job_id, lambda v: v.state == "TRAINING", timeout=120)
        daemons.wait(job_id, lambda v: set(cluster.worker_pids()) - known, timeout=60)
        pid = daemons.procs["bank"].pid
        mine, daemon_tree = set(cluster.worker_pids()) - known, tree(pid)
        # Execute
        daemons.kill("bank")
        # Assert: the daemon was the driver; no process of its own and none of the
        # workers the cluster ran for it outlive it by 10 s
        left = wait_gone(daemon_tree | mine, timeout=10.0)
        assert not left, describe(left)
        assert not in_session(pid), describe(in_session(pid))
        assert all(alive(w) for w in known)  # the cluster and its other drivers go on
        # a daemon started again joins the cluster again and the job resumes to its end
        daemons.wait(job_id, lambda v: v.state == "PAUSED")
        daemons.start_party("bank", breast_datasets_config()["bank"])
        resumed = daemons.vfl("resume", job_id)
        assert resumed.returncode == 0, resumed.stderr
        view = daemons.wait(job_id, lambda v: v.state in ("SUCCEEDED", "FAILED"))
        assert view.state == "SUCCEEDED", view.reason
    finally:
        daemons.stop()
