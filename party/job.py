"""One job as seen by one party: resolve its datasets, align rows, train, report.

Transport-free: the daemon hands in a `Channel` and a `Reporter`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp
from vfl.contract.spec import JobSpec, TableSource
from vfl.contract.states import ALIGNING, ANALYZING, KEYING, TRAINING
from vfl.party.analysis.protocol import EarlyKeys
from vfl.party.analysis.run import early_keys, selection, without_dropped
from vfl.party.analysis.sharing import AnalysisSharing
from vfl.party.compute import connect, log_tasks
from vfl.party.datasets import Dataset, align_rows, check_ids, resolve_dataset
from vfl.party.errors import CheckpointError, DataError, JobError
from vfl.party.kinds import TrainingRole, kind_of
from vfl.party.limits import model_parameters
from vfl.party.state import Checkpoint, StateDir
from vfl.party.state.checkpoints import (
    JobCheckpoints,
    aligned_hash,
    checkpoint_every,
    content_hash,
    unwritable,
)
from vfl.party.state.model_store import Manifest, ModelStore, model_columns
from vfl.party.state.snapshots import Snapshots
from vfl.party.state.views import ViewFiles
from vfl.party.tables.load import read_raw
from vfl.party.tables.preprocess.preprocessor import Preprocessor
from vfl.party.tables.stability import StabilityReference, fit_reference
from vfl.party.tables.table import RawTable, Table
from vfl.party.training.context import Instruments, Reporter, RoleContext
from vfl.party.training.evaluation import evaluate_outputs
from vfl.party.training.inputs import Inputs
from vfl.party.training.plan import Plan
from vfl.party.training.task import make_task
from vfl.secure.channel import Channel
from vfl.secure.executor import BlockExecutor
from vfl.secure.psi.protocol import PsiResult

log = logging.getLogger(__name__)


class PartyJob:
    """A job at one party: `prepare()` loads and checks data, `run()` trains."""

    sharing: AnalysisSharing = AnalysisSharing()  # what features.select's analysis reveals

    def __init__(
        self,
        job_id: str,
        spec: JobSpec,
        party_id: str,
        datasets: dict[str, TableSource],
        state: StateDir | None = None,
        resume_round: int = 0,
        instruments: Instruments | None = None,
        executor: BlockExecutor | None = None,
        record_views: bool = False,
    ) -> None:
        """`instruments`: what the job counts for the daemon's metrics; `executor`: the
        party's (from its config's `compute:`; None: the secure layer's own local pool);
        `record_views`: keep this party's view of the job in its state directory
        (`party.state.views`, for `vfl attack`).

        Raises:
            JobError: `record_views` without a state directory.
        """
        if record_views and state is None:
            raise JobError(
                f"party '{party_id}' keeps no state directory to record its view in; "
                "give it one (state_dir: in its config) or drop --record-views"
            )
        self.record_views = record_views
        self.job_id, self.spec, self.party_id = job_id, spec, party_id
        self.instruments = instruments or Instruments()
        self.executor = executor
        self.role = spec.party(party_id).role
        self.kind = kind_of(spec)  # what it trains, keeps and will hold
        self.dataset = resolve_dataset(spec, party_id, datasets)
        self.test_dataset = resolve_dataset(spec, party_id, datasets, test=True)
        self.raw: RawTable | None = None  # the rows as read, until preprocessed
        self.test_raw: RawTable | None = None
        self.preprocessor: Preprocessor | None = None  # fitted on the training rows
        # the training rows' bins of population stability (kept with the model part)
        self.stability: StabilityReference | None = None
        self.selection: dict | None = None  # features.select: own columns kept and dropped
        self.state, self.resume_round = state, resume_round
        self.resume: Checkpoint | None = None
        self.peers: dict[str, str] = {}  # the peers' addresses (kept with the model)
        self.snapshots: dict[str, str] = {}  # sql datasets read: name -> snapshot SHA-256
        # between blocks read, with the bytes and rows of its tables read so far
        # (`party.guard`: `JobBudget.check`)
        self.check: Callable[[int, int], None] | None = None
        # before the model is built: its parameters and bytes apiece (`Guard.check_model`)
        self.check_model: Callable[[int, int], None] | None = None
        # features.select's analysis key, made while PSI runs (a fresh job only)
        self.early: EarlyKeys | None = None

    def shares(self, sharing: AnalysisSharing) -> PartyJob:
        """This job, with its party config's `analysis:` (features.select's analysis)."""
        self.sharing = sharing
        return self

    def prepare(self) -> RawTable:
        """Load and check the data (and the checkpoint to resume from) before any party
        starts.

        Raises:
            DataError: missing or malformed data, an id in two rows, a label that does not
                fit the task, a database that cannot be reached or whose query fails.
            ConfigError: a database's credential is unset or refused.
            CheckpointError: the checkpoint to resume from is missing, corrupt or another's,
                or a sql dataset's snapshot changed since it.
            JobError: the party's executor cannot run (its Ray cluster is unreachable).
        """
        if self.executor is not None:  # PSI of every protocol runs there too
            connect(self.executor, self.party_id)
        if self.resume_round > 0:
            if self.state is None:
                raise CheckpointError(
                    f"party '{self.party_id}' keeps no state directory, so it holds no "
                    "checkpoint to resume from; restart its daemon with --state-dir"
                )
            self.resume = self.state.load(
                self.job_id, self.resume_round, self.spec.spec_hash(), self.party_id
            )
        try:
            self.raw = self._load(self.dataset)
            if self.test_dataset is not None:
                self.test_raw = self._load(self.test_dataset)
        except BaseException:
            fresh = self.resume is None and self.state is not None
            if fresh and self._reads_sql():  # no resume can need this job's snapshots
                Snapshots(self.state, self.job_id, self.party_id).drop("its PREPARE failed")
            raise
        return self.raw

    def _load(self, dataset: Dataset | None) -> RawTable:
        if dataset is None:
            raise JobError(f"job {self.job_id} names no dataset for party '{self.party_id}'")
        tick = time.monotonic()
        raw = read_raw(self._source(dataset), dataset.name, check=self._read_check())
        log.info(
            "party %s: read dataset %s: %d rows in %.2f s",
            self.party_id,
            dataset.name,
            raw.rows,
            time.monotonic() - tick,
        )
        check_ids(raw, dataset.name)
        self.kind.check_rows(self.spec, raw, dataset.source.preprocess, self.party_id)
        if self.role == "active":
            if raw.labels is None:
                raise DataError(f"dataset '{dataset.name}' has no label column; set 'label'")
            make_task(self.spec.model.task, raw.labels)  # fail early on bad labels
        return raw

    def _read_check(self) -> Callable[[int, int], None] | None:
        """`check` for the next table read: its rows counted after those of the tables
        read before it (max_rows bounds the rows of all of a job's tables)."""
        check, before = self.check, self.raw.rows if self.raw is not None else 0
        if check is None or not before:
            return check
        return lambda read_bytes, read_rows: check(read_bytes, before + read_rows)

    def _reads_sql(self) -> bool:
        """Whether the job reads a dataset from a database (and so keeps snapshots)."""
        given = (self.dataset, self.test_dataset)
        return any(d is not None and d.source.format == "sql" for d in given)

    def _source(self, dataset: Dataset) -> TableSource:
        """What the table reader reads for `dataset`: its file, or for a sql dataset the
        job's snapshot of its query (taken now; on a resume, the one taken when the job
        began, checked against the checkpoint's hash, with no query)."""
        if dataset.source.format != "sql":
            return dataset.source
        recorded = None if self.resume is None else self.resume.state.get("snapshots") or {}
        return Snapshots(self.state, self.job_id, self.party_id).read_source(
            dataset.name, dataset.source, self.snapshots, recorded, self.resume_round
        )

    def _align(
        self, channel: Channel, table: RawTable, tag: str, dataset: Dataset | None
    ) -> tuple[np.ndarray, PsiResult]:
        name = "" if dataset is None else dataset.name
        psi = align_rows(channel, self.spec, self.party_id, table, tag, self.executor, name)
        return psi.positions, psi

    def run(self, channel: Channel, reporter: Reporter) -> dict:
        raw = self.prepare() if self.raw is None else self.raw
        self.raw = None  # the aligned, preprocessed rows replace it
        started = time.monotonic()
        self.early = early_keys(self.spec, self.party_id) if self.resume is None else None
        reporter.stage(ALIGNING)
        order, psi = self._align(channel, raw, "psi", self.dataset)
        test_size = 0
        if self.test_raw is not None:
            test_order, test_psi = self._align(
                channel, self.test_raw, "psi-test", self.test_dataset
            )
            test_size = test_psi.intersection_size
            plan = self._plan(len(order), len(test_order))
            self._fit(raw, order, channel, reporter)
        else:
            plan = self._plan(len(order), None)
            self._fit(raw, order[plan.train_rows], channel, reporter)
        table = self._apply(raw, self.dataset, order)  # only the aligned rows, in order
        del raw  # with it the raw columns
        train, labels, aligned = _inputs(table), table.labels, [table.ids]
        has_test = self.test_raw is not None
        if self.test_raw is not None:
            test = self._apply(self.test_raw, self.test_dataset, test_order)
            self.test_raw = None
            val, val_labels = _inputs(test), test.labels
            aligned.append(test.ids)
            del test
        else:
            val, val_labels = train, labels
        del table  # training reads its inputs
        aligned_ids = aligned[0] if len(aligned) == 1 else np.concatenate(aligned)
        reporter.aligned(psi.intersection_size, round(psi.seconds, 3), test_size)
        ctx = RoleContext(self.spec, self.party_id, channel, train, plan, reporter, val)
        ctx.executor = self.executor
        content = [train.x, train.cat, labels]
        if has_test:
            content += [val.x, val.cat, val_labels]
        ctx.checkpoints = self._checkpoints(
            plan, aligned_hash(aligned_ids), content_hash(content), reporter
        )
        ctx.start_round = self.resume_round
        ctx.instruments = self.instruments
        if self.record_views:
            ctx.view = self._view(ctx, aligned[0], labels)
        log.info("party %s: %d rounds", self.party_id, plan.total_rounds)
        if self.check_model is not None:  # the inputs are known now: embeddings counted
            n = model_parameters(self.spec, self.party_id, train.width, train.cardinalities)
            self.check_model(n, self.kind.parameter_bytes(self.spec))
        result = self._train(ctx, labels, val_labels, reporter)
        # the ids of the rows validated on, in the order of `validation_outputs`
        val_ids = aligned_ids[len(order) :] if has_test else aligned_ids
        result["validation_ids"] = val_ids[plan.val_rows]
        channel.close()  # done with it: an emulated WAN delivers the last envelopes first
        log_tasks(self.executor, self.party_id)
        result["seconds"] = round(time.monotonic() - started, 3)
        result["bytes_sent"] = channel.stats.bytes_sent
        return result

    def _view(self, ctx: RoleContext, ids: np.ndarray, labels: np.ndarray | None) -> ViewFiles:
        """This party's recorded view (`party.state.views`), begun with its own rows: their
        ids, its inputs, the plan's training and validation rows (and its labels)."""
        assert self.state is not None
        view = ViewFiles(self.state.root / "views" / self.job_id)
        every = np.arange(ctx.inputs.rows)
        x = ctx.inputs.features(every)
        own = {
            "ids": np.array([str(i) for i in ids]),
            "inputs": x.toarray() if isinstance(x, sp.csr_matrix) else x,
            "train_rows": ctx.plan.train_rows,
            "val_rows": ctx.plan.val_rows,
            "batches_per_epoch": np.array(ctx.plan.batches_per_epoch),
            "labels": labels,
        }
        view.record("own", own)
        return view

    def _fit(self, raw: RawTable, rows: np.ndarray, channel: Channel, reporter: Reporter) -> None:
        """The training rows' preprocessing, fitted on `rows` (on resume, the one fitted
        before the crash), without the columns `features.select` drops (`selection`)."""
        assert self.dataset is not None
        kept = {} if self.resume is None else self.resume.state
        saved = kept.get("preprocess")
        if saved is not None:
            self.preprocessor = Preprocessor.model_validate_json(saved)
            self.selection = kept.get("selection")  # what features.select chose
        else:
            mode = self.dataset.source.preprocess or "auto"
            if self.spec.features.select is not None:  # every party's WOE/IV first
                reporter.stage(ANALYZING)
                chosen = (channel, self.spec, raw, rows, self.executor, self.sharing, self.early)
                self.selection = selection(*chosen)
            fitted = self.kind.preprocessing(self.spec, raw, rows, mode)
            self.preprocessor = without_dropped(fitted, self.selection)
        self.stability = fit_reference(raw, rows, self.preprocessor)  # the same on resume

    def _apply(self, raw: RawTable, dataset: Dataset | None, rows: np.ndarray) -> Table:
        """The aligned rows `rows` of `raw`, preprocessed; `raw`'s columns are released as
        they are written (the job reads them once)."""
        assert self.preprocessor is not None and dataset is not None
        where = f"party '{self.party_id}': dataset '{dataset.name}'"
        table, _ = self.preprocessor.apply(raw, where, rows, consume=True)
        return table

    def _plan(self, rows: int, test_rows: int | None) -> Plan:
        return self.kind.plan(self.spec, rows, test_rows)

    def _train(self, ctx: RoleContext, labels, val_labels, reporter: Reporter) -> dict:
        """KEYING (a keyed job: keys, their exchange and the layers' setup; on resume, the
        keys and layers of the checkpoint, with nothing exchanged), then TRAINING."""
        if self.kind.keyed(self.spec):
            reporter.stage(KEYING)
        trainer = self.kind.trainer(ctx, self.role, labels, val_labels)
        try:
            if self.resume is not None and isinstance(ctx.checkpoints, JobCheckpoints):
                trainer.restore(ctx.checkpoints.trainer_state(self.resume))
                log.info("party %s: resumed after round %d", self.party_id, self.resume_round)
            else:
                trainer.setup()
            reporter.stage(TRAINING)
            result = trainer.run()
            if val_labels is not None:  # the active party
                self._read_scores(trainer, result, val_labels[ctx.plan.val_rows])
            self._keep_model(trainer, ctx.plan.rows)
            if self._reads_sql():  # the job ended here: no resume reads them again
                Snapshots(self.state, self.job_id, self.party_id).drop("the job ended")
            return result
        finally:
            trainer.close()

    def _read_scores(self, trainer: TrainingRole, result: dict, labels: np.ndarray) -> None:
        """The active party's reading of the final validation's scores: the evaluation of a
        binary task (into `result`), and the scores' bins of population stability."""
        task, outputs = getattr(trainer, "task", None), result.get("validation_outputs")
        if task is None or outputs is None or not len(outputs):
            return
        evaluation = evaluate_outputs(task, outputs, labels)
        if evaluation is not None:
            result["evaluation"] = evaluation
        if task.kind in ("binary", "regression") and self.stability is not None:
            scores = next(iter(task.scores(outputs).values()))
            self.stability = self.stability.with_scores(scores)

    def _keep_model(self, trainer: TrainingRole, rows: int) -> None:
        """Keep this party's part of the trained model in its model store (a party without
        a state directory keeps none)."""
        if self.state is None or self.preprocessor is None:
            return
        manifest = Manifest(
            model_id=self.job_id,
            name=self.spec.job,
            party_id=self.party_id,
            role=self.role,
            protocol=self.spec.protocol,
            columns=model_columns(self.preprocessor),
            spec_json=self.spec.to_json(),
            spec_hash=self.spec.spec_hash(),
            kind=self.kind.name,
            key_fingerprint=self.kind.key_fingerprint(trainer),
            task=getattr(trainer, "task", None),
            metrics=dict(getattr(trainer, "metrics", {})),
            rows=rows,
            peers=dict(self.peers),
            snapshots=dict(self.snapshots),
        )
        part = self.kind.model_part(trainer)
        part["preprocess"] = self.preprocessor.model_dump_json()
        if self.stability is not None:
            part["stability"] = self.stability.model_dump_json()
        if self.selection is not None:
            part["selection"] = self.selection
        try:
            ModelStore(self.state).save(manifest, part)
        except OSError as exc:  # the job's last checkpoint stays: a resume keeps the model
            raise unwritable(self.party_id, f"its part of model {self.job_id}", exc) from exc
        log.info("party %s: kept its part of model %s", self.party_id, self.job_id)

    def _checkpoints(
        self, plan: Plan, aligned: str, content: str, reporter: Reporter
    ) -> JobCheckpoints | None:
        every = checkpoint_every(self.spec, plan.batches_per_epoch)
        if self.state is None or (every == 0 and self.resume is None):
            return None
        return JobCheckpoints(
            self.state,
            self.job_id,
            self.spec,
            self.party_id,
            every,
            plan.total_rounds,
            aligned,
            content,
            reporter.checkpoint,
            self.preprocessor.model_dump_json() if self.preprocessor is not None else None,
            dict(self.snapshots),
            self.selection,
        )


def _inputs(table: Table) -> Inputs:
    return Inputs(table.features, table.categorical, table.cardinalities)
