"""A batch prediction at one party: align the rows to score by PSI, then run the stored
model's forward pass batch by batch with the protocol it was trained with.

Only the active party ends with scores: a CSV of `id` and the task's score columns in its
output folder, in the order of its own dataset, and metrics when its rows carry labels.
A passive party learns the intersection size (as in training) and nothing else.
"""

from __future__ import annotations

import csv
import io
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from vfl.contract.spec import JobSpec
from vfl.contract.states import ALIGNING, PREDICTING
from vfl.party.compute import connect, log_tasks
from vfl.party.datasets import Dataset, align_rows, check_ids, resolve_dataset, snapshotted
from vfl.party.errors import JobError, ModelError
from vfl.party.inference.model import LoadedModel
from vfl.party.state import StateDir
from vfl.party.state.model_store import ModelStore
from vfl.party.state.store import write_atomically
from vfl.party.tables.preprocess.drift import Drift
from vfl.party.tables.stability import Share, index, level, summary
from vfl.party.tables.table import Table
from vfl.party.training.context import Reporter
from vfl.party.training.evaluation import evaluate_outputs
from vfl.party.training.inputs import Inputs
from vfl.proto import coordinator_pb2 as pb
from vfl.secure.channel import Channel
from vfl.secure.executor import BlockExecutor

log = logging.getLogger(__name__)


class PredictJob:
    """A prediction job at one party: `prepare()` loads the model part and the rows and
    checks that they fit, `run()` aligns and scores."""

    def __init__(
        self,
        job_id: str,
        spec: JobSpec,
        party_id: str,
        datasets: dict[str, Any],
        state: StateDir | None,
        output_dir: Path | None,
        executor: BlockExecutor | None = None,
        share: Share = "counts",
    ) -> None:
        """`executor`: the party's (its config's `compute:`; None: a local pool);
        `share`: what of its columns' stability crosses (its config's `stability.share`)."""
        if spec.predict is None:
            raise JobError(f"job {job_id} is not a prediction")
        self.job_id, self.spec, self.party_id = job_id, spec, party_id
        self.request = spec.predict
        self.role = spec.party(party_id).role
        self.dataset: Dataset | None = resolve_dataset(spec, party_id, datasets)
        self.state, self.output_dir = state, output_dir
        self.model: LoadedModel | None = None
        # between blocks read, with the bytes and rows read so far (`JobBudget.check`)
        self.check: Callable[[int, int], None] | None = None
        self.table: Table | None = None
        self.inputs: Inputs | None = None
        self.drift = Drift()
        self.stability_codes: np.ndarray | None = None  # each cell's stability bin
        self.executor = executor
        self.share = share

    @property
    def output_name(self) -> str:
        return f"{self.request.out or self.job_id}.csv"

    def prepare(self) -> Table:
        """Load the model part and the rows, and check they fit, before any party starts.

        Raises:
            ModelError: the model is not held here, or the rows do not fit it.
            DataError: missing or malformed data, an id in two rows. JobError: the output
            exists already, or the party's executor cannot run (its Ray cluster is
            unreachable).
        """
        if self.executor is not None:  # PSI of every protocol runs there too
            connect(self.executor, self.party_id)
        self.model = LoadedModel.open(self.state, self.request.model, self.party_id)
        m = self.model.manifest
        held = (m.role, m.kind, m.protocol)
        if held != (self.role, self.spec.model.kind, self.spec.protocol):
            raise ModelError(
                f"party '{self.party_id}' holds model {m.model_id} as the {m.role} party of a "
                f"{m.protocol} {m.kind} job, not as the {self.role} party of a "
                f"{self.spec.protocol} {self.spec.model.kind} job"
            )
        if self.dataset is None:
            raise JobError(f"job {self.job_id} names no dataset for party '{self.party_id}'")
        with snapshotted(self.dataset, self.state, self.job_id, self.party_id) as dataset:
            raw = self.model.read_raw(dataset, self.check)
        self.table, self.inputs, self.drift = self.model.prepare(raw)
        reference = self.model.stability
        self.stability_codes = None if reference is None else reference.codes(raw)
        del raw
        check_ids(self.table, self.dataset.name)
        if self.role == "active":
            self._output_path()  # fail now, not after scoring, if it cannot be written
        return self.table

    def _output_path(self) -> Path:
        if self.output_dir is None:
            raise JobError(
                f"party '{self.party_id}' has no output folder for scores; set output_dir "
                "(or state_dir) in its config"
            )
        path = self.output_dir / self.output_name
        if path.exists():
            raise JobError(
                f"party '{self.party_id}' already holds scores named '{self.output_name}'; "
                "choose another --out NAME, or move the old file away",
            )
        return path

    def run(self, channel: Channel, reporter: Reporter) -> dict:
        if self.model is None:
            self.prepare()
        assert self.model is not None and self.table is not None and self.inputs is not None
        begun = time.monotonic()
        reporter.stage(ALIGNING)
        named = "" if self.dataset is None else self.dataset.name
        psi = align_rows(channel, self.spec, self.party_id, self.table, "psi", self.executor, named)
        reporter.aligned(psi.intersection_size, round(psi.seconds, 3))
        order = psi.positions
        if len(order) == 0:
            raise JobError("the parties hold no common ids: there is nothing to score")
        reporter.stage(PREDICTING)
        inputs = self.inputs.subset(order)
        batch = self.request.batch_size
        scorer = self.model.scorer(channel, inputs, reporter, batch, executor=self.executor)
        batches = [
            (f"predict/b{b}", np.arange(start, min(start + batch, len(order))))
            for b, start in enumerate(range(0, len(order), batch), start=1)
        ]
        outputs: list[np.ndarray] = []
        try:
            for b, out in enumerate(scorer.score_batches(inputs, batches), start=1):
                if out is not None:
                    outputs.append(out)
                reporter.round(b, len(batches), None, channel.stats.bytes_sent)
        finally:
            scorer.close()
        log_tasks(self.executor, self.party_id)
        channel.close()  # done with it: an emulated WAN delivers the last envelopes first
        result: dict[str, Any] = {
            "rounds": len(batches),
            "seconds": round(time.monotonic() - begun, 3),
            "bytes_sent": channel.stats.bytes_sent,
            "model": self.model.model_id,
            "drift": self.drift.totals(order),  # the rows scored
        }
        if self.state is not None:
            ModelStore(self.state).add_drift(self.model.model_id, result["drift"])
        out = np.concatenate(outputs) if self.role == "active" else None
        stability = self._stability(order, out)
        if stability is not None:
            result["stability"] = stability
        if out is not None:
            result.update(self._write(order, out))
        return result

    def _stability(self, order: np.ndarray, out: np.ndarray | None) -> pb.Stability | None:
        """The population stability of the rows scored (`order`) against the training
        rows: per column here, and of the scores `out` at the active party; kept in the
        model store and logged here, and summarised as the party's config shares it."""
        assert self.model is not None
        reference, codes = self.model.stability, self.stability_codes
        if reference is None or codes is None:
            return None  # a model part kept before stability was
        columns = reference.indexes(codes[order])
        scores, task, bins = None, self.model.manifest.task, reference.scores
        if out is not None and task is not None and bins is not None:
            values = next(iter(task.scores(out).values()))
            scores = index(bins.counts, np.bincount(bins.codes(values), minlength=len(bins.counts)))
        moved = sorted(n for n, v in columns.items() if level(v) != "stable")
        if moved:
            log.warning(
                "party %s: columns at watch or shift against model %s's training rows: %s",
                self.party_id,
                self.model.model_id,
                ", ".join(f"{n} ({level(columns[n])})" for n in moved),
            )
        if self.state is not None:
            ModelStore(self.state).keep_stability(self.model.model_id, self.job_id, columns, scores)
        return summary(columns, self.share, scores)

    def _write(self, order: np.ndarray, out: np.ndarray) -> dict[str, Any]:
        """Write the scores (in the dataset's own row order) and return the summary."""
        assert self.model is not None and self.table is not None
        task = self.model.manifest.task
        if task is None:
            raise ModelError(f"the active party's part of model {self.model.model_id} has no task")
        by_row = np.argsort(order, kind="stable")  # aligned position of each scored row
        rows, out = order[by_row], out[by_row]
        columns = task.scores(out)
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        writer.writerow(["id", *columns])
        values = list(columns.values())
        for i, r in enumerate(rows):
            writer.writerow([self.table.ids[r], *(_cell(v[i]) for v in values)])
        path = self._output_path()
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_atomically(path, text.getvalue().encode())
        log.info("party %s: wrote %d scores to %s", self.party_id, len(rows), path)
        metrics: dict[str, float] = {}
        extra: dict[str, Any] = {}
        if self.table.labels is not None:
            metrics = task.evaluate(out, task.encode(self.table.labels[rows]))
            evaluation = evaluate_outputs(task, out, self.table.labels[rows])
            if evaluation is not None:
                extra["evaluation"] = evaluation
        return {
            **extra,
            "metrics": metrics,
            "prediction": {
                "model": self.model.model_id,
                "rows": self.table.rows,
                "scored": len(rows),
                "missing": self.table.rows - len(rows),
                "output": self.output_name,
            },
        }


def _cell(value: Any) -> str:
    return repr(float(value)) if isinstance(value, float | np.floating) else str(value)
