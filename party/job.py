"""One job as seen by one party: resolve its dataset, align rows, train, report.

Transport-free: the daemon hands in a `Channel` and a `Reporter`.
"""

from __future__ import annotations

import dataclasses
import logging
import time

from coordinator.spec import DataSpec, JobSpec
from party.data import DatasetConfig, Table, load_table
from party.errors import DataError, JobError
from party.training.active import ActiveTrainer
from secure.psi import PsiConfig, run_psi
from party.training.context import Reporter, RoleContext
from party.training.models import Inputs
from party.training.passive import PassiveTrainer
from party.training.plan import make_plan
from party.training.task import make_task
from secure.channel import Channel

log = logging.getLogger(__name__)


def resolve_dataset(spec: JobSpec, party_id: str, datasets: dict[str, DatasetConfig]):
    """The dataset this party trains on, from its own config only.

    Raises:
        JobError: the job names a path, or a dataset this party does not expose.
    """
    data: DataSpec = spec.party(party_id).data
    if data.path is not None:
        raise JobError(
            f"party '{party_id}' does not open paths named in job specs; expose the file as a "
            f"dataset in the party config and name it with data: {{dataset: NAME}}"
        )
    if data.dataset not in datasets:
        raise JobError(
            f"party '{party_id}' exposes no dataset '{data.dataset}'; it exposes "
            f"{sorted(datasets) or 'none'}: add it under 'datasets' in the party config"
        )
    cfg = datasets[str(data.dataset)]
    overrides = {
        k: v
        for k, v in (
            ("id", data.id),
            ("label", data.label),
            ("format", data.format),
            ("categorical", data.categorical),
        )
        if v is not None
    }
    return dataclasses.replace(cfg, **overrides)


class PartyJob:
    """A job at one party: `prepare()` loads and checks data, `run()` trains."""

    def __init__(
        self, job_id: str, spec: JobSpec, party_id: str, datasets: dict[str, DatasetConfig]
    ) -> None:
        self.job_id, self.spec, self.party_id = job_id, spec, party_id
        self.role = spec.party(party_id).role
        self.dataset = resolve_dataset(spec, party_id, datasets)
        self.table: Table | None = None

    def prepare(self) -> Table:
        table = load_table(self.dataset)
        if self.role == "active" and table.labels is None:
            raise DataError(f"dataset '{self.dataset.name}' has no label column; set 'label'")
        if self.role == "active":
            make_task(self.spec.model.top.task, table.labels)  # fail early on bad labels
        self.table = table
        return table

    def run(self, channel: Channel, reporter: Reporter) -> dict:
        table = self.table or self.prepare()
        started = time.monotonic()
        passives = [p.id for p in self.spec.passives]
        reporter.state("ALIGNING")
        psi = run_psi(channel, self.party_id, self.spec.active.id, passives, list(table.ids),
                      "psi", seed=self.spec.train.seed,
                      config=PsiConfig(timeout=self.spec.train.timeout_s))
        order = psi.positions
        reporter.aligned({"intersection_size": psi.intersection_size,
                          "psi_seconds": round(psi.seconds, 3)})
        reporter.state("TRAINING")
        t = self.spec.train
        plan = make_plan(
            len(order),
            self.spec.validation.fraction,
            t.batch_size,
            t.epochs,
            t.seed,
            self.spec.validation.every,
        )
        cats = None if table.categorical is None else table.categorical[order]
        inputs = Inputs(table.features[order], cats, table.cardinalities)
        ctx = RoleContext(self.spec, self.party_id, channel, inputs, plan, reporter)
        log.info(
            "job %s party %s: training %d rounds", self.job_id, self.party_id, plan.total_rounds
        )
        if self.role == "active":
            labels = table.labels[order]
            task = make_task(self.spec.model.top.task, labels[plan.train_rows])
            result = ActiveTrainer(ctx, labels, task).run()
        else:
            result = PassiveTrainer(ctx).run()
        result["seconds"] = round(time.monotonic() - started, 3)
        result["bytes_sent"] = channel.stats.bytes_sent
        return result
