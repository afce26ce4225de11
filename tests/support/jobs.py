"""A small breast job spec and waiting for a job to end, for tests over real daemons."""

from __future__ import annotations

import time

from vfl.coordinator.client import CoordinatorClient

JOB = """
job: {name}
parties:
  - {{id: bank, role: active, data: {{dataset: {bank}}}}}
  - {{id: shop, role: passive, data: {{dataset: {shop}}}}}
train: {{epochs: {epochs}, batch_size: 64}}
validation: {{every: 10}}
"""


def job(name: str = "t", bank: str = "breast", shop: str = "breast", epochs: int = 3) -> str:
    return JOB.format(name=name, bank=bank, shop=shop, epochs=epochs)


def wait(
    client: CoordinatorClient,
    job_id: str,
    timeout: float = 120.0,
    until: tuple[str, ...] = ("SUCCEEDED", "FAILED", "CANCELLED"),
):
    """Poll the job until it is in one of the states `until` (by default: it ended)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        view = client.get(job_id)
        if view.state in until:
            return view
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} still {view.state}")


def checkpointed_breast_job(name: str, dataset: str, epochs: int) -> dict:
    """A split breast job with the deterministic CELU schedule that checkpoints every 10
    rounds (a resumed run must end exactly where an uninterrupted one ends)."""
    return {
        "job": name,
        "parties": [
            {"id": "bank", "role": "active", "data": {"dataset": dataset}},
            {"id": "shop", "role": "passive", "data": {"dataset": dataset}},
        ],
        "model": {"source": {"out_dim": 8}, "top": {"hidden": [16]}},
        "local_updates": {"mode": "celu", "workset": 4, "reuse": 3, "schedule": "sync"},
        "train": {"epochs": epochs, "batch_size": 64, "checkpoint_every": 10},
        "validation": {"every": 10},
    }
