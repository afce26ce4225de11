"""Workers die with their daemon: kill -9 a party daemon in the middle of a blindfl job
whose Paillier work and PSI run on its worker pool; 10 s later no process of the
daemon's tree is alive (its pool's workers, obfuscator helpers, the multiprocessing
resource tracker), and a daemon started again in its place runs beside none of them."""

from __future__ import annotations

import pytest
import yaml

from tests.support.data import breast_datasets_config
from tests.support.processes import Daemons
from tests.support.proctree import describe, in_session, tree, wait_gone

pytestmark = pytest.mark.subprocess

JOB = {
    "job": "workers",
    "protocol": "blindfl",
    "crypto": {"key_bits": 512, "allow_insecure_test_keys": True},  # INSECURE test keys
    "parties": [
        {"id": "bank", "role": "active", "data": {"dataset": "breast"}},
        {"id": "shop", "role": "passive", "data": {"dataset": "breast"}},
    ],
    "model": {"source": {"out_dim": 4}, "top": {"hidden": [8]}},
    "train": {"epochs": 20, "batch_size": 64},
    "validation": {"every": 1000},
}
# small tasks: PSI blindings and the blindfl products go to the worker pool
COMPUTE = {"workers": 2, "min_task_ms": 0.05}


def start(workdir) -> Daemons:
    workdir.mkdir()
    daemons = Daemons(workdir)
    daemons.start_coordinator()
    for party, datasets in breast_datasets_config().items():
        body = {"party": party, "coordinator": daemons.address, "datasets": datasets}
        (workdir / f"{party}.yaml").write_text(yaml.safe_dump({**body, "compute": COMPUTE}))
        daemons.start_party(party, datasets)
    return daemons


@pytest.mark.parametrize("victim", ["shop", pytest.param("bank", marks=pytest.mark.slow)])
def test_no_process_of_a_killed_daemon_outlives_it(tmp_path, victim) -> None:
    # Prepare: a job training with the victim's worker pool running
    daemons = start(tmp_path / "run")
    try:
        with daemons.client() as client:
            job_id = client.submit(yaml.safe_dump(JOB))
        daemons.wait(job_id, lambda v: v.state == "TRAINING", timeout=120)
        pid = daemons.procs[victim].pid
        daemons.wait(job_id, lambda v: len(tree(pid)) >= 3, timeout=60)  # workers, tracker
        before = tree(pid)
        # Execute
        daemons.kill(victim)
        left = wait_gone(before, timeout=10.0)
        # Assert
        assert not left, f"alive 10 s after kill -9 of {victim}:\n{describe(left)}"
        assert not in_session(pid), describe(in_session(pid))
        daemons.start_party(victim, breast_datasets_config()[victim])
        again = tree(daemons.procs[victim].pid)
        assert not before & again and not in_session(pid)
    finally:
        daemons.stop()
