"""The party daemon's logic: it prepares, starts, runs and aborts this party's jobs.

It wires the parts a party daemon is made of: its jobs (`party.registry`), its end of the
data plane (`party.transport.endpoint`), its executor and kept pools (`party.compute`),
its model parts (`party.parts`) and online scoring (`party.inference.online`). The servicer
(`party/servicer.py`) only translates between protobufs and these calls; every domain
error is a `PartyError` or `SecureError` that the servicer maps to a status.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from vfl.contract.errors import ContractError, SpecError
from vfl.contract.logs import job_context
from vfl.contract.spec import JobSpec, NetworkSpec
from vfl.party.analysis.job import AnalysisJob
from vfl.party.compute import PartyCompute
from vfl.party.config import PartyConfig
from vfl.party.errors import (
    JobError,
    LimitExceeded,
    ModelError,
    PartyError,
    failure_reason,
)
from vfl.party.guard import Guard
from vfl.party.inference.batch import PredictJob
from vfl.party.inference.online import OnlineScoring
from vfl.party.job import PartyJob
from vfl.party.limits import JobEstimate, estimate_job
from vfl.party.metrics import MeteredReporter, PartyMetrics
from vfl.party.parts import ModelParts
from vfl.party.registry import JobRegistry, RunningJob
from vfl.party.report_sender import ReportSender
from vfl.party.reporting import CoordinatorReporter
from vfl.party.state import StateDir
from vfl.party.state.model_store import Manifest
from vfl.party.state.snapshots import sweep
from vfl.party.transport.endpoint import Arrival, Endpoint
from vfl.party.transport.grpc_channel import SESSION_PLANE
from vfl.party.transport.ping import PingResult
from vfl.party.transport.scoring import ScoringPeers
from vfl.proto import coordinator_pb2 as pb
from vfl.rpc import PeerClients
from vfl.secure.channel import Mailbox
from vfl.secure.errors import ChannelClosed, SecureError

log = logging.getLogger(__name__)

PREPARED_TTL_S = 60.0  # a prepared job not started within max(this, train.timeout_s) is dropped


@dataclass(frozen=True)
class DaemonOptions:
    """Operator settings of a party daemon (flags of `vfl party serve`)."""

    audit_dir: str | None = None  # log every envelope (the wire audit, docs/security.md)
    network: NetworkSpec | None = None  # emulate a WAN on every job's data plane
    scoring_timeout_s: float = 10.0  # online scoring: longest wait for a peer's envelope
    record_views: bool = False  # keep each job's view in the state directory (`vfl attack`)


class PartyDaemon:
    """Holds the jobs of one party; thread-safe."""

    def __init__(
        self,
        config: PartyConfig,
        clients: PeerClients,
        coordinator: ReportSender | None,  # delivers reports to the coordinator
        options: DaemonOptions | None = None,
        locate: Callable[[str], dict[str, str]] | None = None,  # a model's parties, now
    ) -> None:
        self.config = config
        self.options = options or DaemonOptions()
        self._coordinator = coordinator
        self.state = None if config.state_dir is None else StateDir.create(config.state_dir)
        # the party's executor, shared by its jobs, and the obfuscator pools it keeps
        self.compute = PartyCompute(config, self.state)
        self.executor = self.compute.executor
        self.jobs = JobRegistry(config.party_id, self.compute.idle)
        self.guard = Guard(config.party_id, config.limits, self.jobs.held)  # `limits:`
        self.address = ""  # where peers reach this daemon (set once it serves)
        self.started_at = time.time()  # told to the coordinator (a restart, named as such)
        self.metrics = PartyMetrics(self.jobs_by_state, self.compute.ready_counts)  # --metrics
        self.parts = ModelParts(config.party_id, self.state, self.metrics)  # its model store
        self.endpoint = Endpoint(  # the data plane: envelopes in, channels out
            config.party_id,
            clients,
            self._locate,
            self.metrics.envelope,
            config.limits.max_envelope_bytes,
            self.options.audit_dir,
        )
        timeout = self.options.scoring_timeout_s
        self.online = OnlineScoring(
            config,
            self.state,
            functools.partial(self.endpoint.channel, send_timeout=timeout, plane=SESSION_PLANE),
            ScoringPeers(clients, timeout),
            lambda: self.address,
            timeout,
            self.executor,
            self.parts.count_drift,
            locate,
        )

    # --- control plane -------------------------------------------------------------

    def prepare(
        self, job_id: str, spec_json: str, peers: dict[str, str], resume_round: int = 0
    ) -> None:
        """Load and check this party's data for a job (and, to resume it, its checkpoint of
        `resume_round`); create its mailbox.

        Raises:
            JobError, DataError, SpecError, CheckpointError: the job cannot run here (the
                message names the fix).
        """
        with job_context(job_id):
            self._prepare(job_id, spec_json, peers, resume_round)

    def checkpoints(self, job_id: str, spec_json: str) -> dict[int, str]:
        """The rounds of `job_id` this party holds a checkpoint of, each with "" if it can
        be resumed from, else why not.

        Raises:
            JobError: the spec is invalid.
        """
        spec = self._parse(job_id, spec_json)
        if self.state is None:
            return {}
        return self.state.usable_rounds(job_id, spec.spec_hash(), self.config.party_id)

    def models(self) -> list[Manifest]:
        """The model parts this party keeps, oldest first (none without a state directory)."""
        return self.parts.models()

    def table_problems(self, model_id: str) -> dict[str, str]:
        """The tables online scoring with `model_id` cannot use now, and why, in the form
        that may leave the party (`OnlineScoring.problems`)."""
        return {name: p.public for name, p in self.online.problems(model_id).items()}

    def delete_model(self, model_id: str) -> bool:
        """Drop this party's part of `model_id` (and online scoring's copy); returns
        whether it held one.

        Raises:
            ModelError: `model_id` cannot be a model's id.
        """
        self.online.unload(model_id, "deleted")  # no scoring from an in-memory copy
        return self.parts.delete(model_id)

    def start(self, job_id: str) -> None:
        """Start a prepared job's thread (a job started already is left as it is).

        Raises:
            JobError: this party holds no such job.
        """
        self.jobs.start(job_id, self._run)

    def join_jobs(self, timeout: float) -> None:
        """Wait for job threads to finish (after `abort`), so none outlives the daemon."""
        self.jobs.join(timeout)

    def abort(self, job_id: str, reason: str) -> None:
        running = self.jobs.abort(job_id, f"aborted: {reason or 'by the coordinator'}")
        if running is not None:
            running.mailbox.close(reason or "aborted by the coordinator")
            log.info("party %s: aborted (%s)", self.config.party_id, reason or "by the coordinator")

    def drop(self, job_id: str, reason: str) -> None:
        """The coordinator ended job `job_id` without success (failed, cancelled, paused, or
        a launch dropped): abort it here, and drop the model part it may have kept, which
        no model stands for (a resumed run keeps its part again when it ends)."""
        self.abort(job_id, reason)
        try:
            if self.delete_model(job_id):
                log.info(
                    "party %s: dropped the part the job had kept (%s)", self.config.party_id, reason
                )
        except ModelError:  # not a model's id: it kept none
            pass

    def running_jobs(self) -> list[str]:
        """Jobs this party holds: loading, prepared, started, or ended with a final report
        the coordinator has not acknowledged yet."""
        return sorted(self.jobs.held() | self._finishing())

    def jobs_by_state(self) -> dict[str, int]:
        """How many jobs this party holds: loading data, prepared, running."""
        return self.jobs.by_state()

    def started_jobs(self) -> list[str]:
        """Jobs whose training StartJob started (also those ended but not yet reported:
        a restarted coordinator waits for their final report instead of pausing them)."""
        return sorted(self.jobs.started() | self._finishing())

    def _finishing(self) -> set[str]:
        return set() if self._coordinator is None else set(self._coordinator.pending_final())

    def _parse(self, job_id: str, spec_json: str) -> JobSpec:
        try:
            return JobSpec.from_json(spec_json)  # parsed once; the job and its roles share it
        except SpecError as exc:
            raise JobError(f"job {job_id}: invalid spec: {exc}") from exc

    def _prepare(
        self, job_id: str, spec_json: str, peers: dict[str, str], resume_round: int
    ) -> None:
        spec = self._parse(job_id, spec_json)
        me = self.config.party_id
        if self.state is not None:  # stopped jobs' database snapshots, unused for days
            sweep(self.state, self.jobs.held() | {job_id})
        with self.jobs.loading(job_id):
            job = self._job(job_id, spec, resume_round)
            budget = self.guard.admit(job_id, self._estimate(spec, job))
            job.check = budget.check  # the guard may fail it while its data loads
            if isinstance(job, PartyJob):
                job.check_model = functools.partial(self.guard.check_model, budget)
            try:
                table = job.prepare()
                budget.check()  # the guard failed it while it loaded
            except BaseException:
                self.guard.close(budget)
                raise
        addresses = {**peers, **self.config.peers}
        missing = [p.id for p in spec.parties if p.id != me and p.id not in addresses]
        if missing:
            raise JobError(
                f"no address for peer(s) {missing}; add them under 'peers' in "
                "the party config or start them against the same coordinator"
            )
        if isinstance(job, PartyJob):
            job.peers = {p.id: addresses[p.id] for p in spec.parties if p.id != me}
        mailbox = Mailbox(self.config.limits.mailbox_bytes)
        network = spec.network if spec.network is not None else self.options.network
        channel = self.endpoint.channel(job_id, mailbox, addresses, spec.train.timeout_s, network)
        running = RunningJob(job, mailbox, channel, budget)
        budget.on_fail = functools.partial(self._fail_job, job_id)
        budget.check()  # (failed before it had `on_fail`, which reports it)
        self.jobs.add(job_id, running)
        ttl = max(spec.train.timeout_s, PREPARED_TTL_S)
        expiry = threading.Timer(ttl, self._expire_if_never_started, (job_id, running.prepared_at))
        expiry.daemon = True
        expiry.start()
        log.info("party %s: prepared (%d rows)", me, table.rows)

    def _job(self, job_id: str, spec: JobSpec, resume_round: int) -> PartyJob | PredictJob:
        """This party's part of a job: scoring with a model, or training one."""
        cfg = self.config
        if spec.predict is not None:
            where = (cfg.datasets, self.state, cfg.scores_dir, self.executor)
            return PredictJob(job_id, spec, cfg.party_id, *where, cfg.stability.share)
        job = AnalysisJob if spec.analyze else PartyJob  # an analysis: `vfl analyze`
        return job(
            job_id,
            spec,
            cfg.party_id,
            cfg.datasets,
            self.state,
            resume_round,
            self.metrics.instruments(),
            self.executor,
            self.options.record_views,
        ).shares(cfg.analysis)

    def _estimate(self, spec: JobSpec, job: PartyJob | PredictJob) -> JobEstimate:
        """What `job` will hold here (`party.limits.estimate_job`), before it loads."""
        given = [job.dataset] + ([job.test_dataset] if isinstance(job, PartyJob) else [])
        tables = [d.source for d in given if d is not None]
        return estimate_job(spec, self.config.party_id, tables, type(job) is PartyJob)

    def _fail_job(self, job_id: str, error: LimitExceeded) -> None:
        """The guard failed a held job (`party.guard`): report it FAILED, then stop it as
        a cancel does (its thread stops at its next message or check)."""
        party = self.config.party_id
        with job_context(job_id):
            reporter = CoordinatorReporter(self._coordinator, job_id, party, lambda: None)
            reporter.failed(failure_reason(error, party))
            self.abort(job_id, f"over a limit of party '{party}'")

    def _expire_if_never_started(self, job_id: str, prepared_at: float) -> None:
        """Drop a prepared job (and its table) that no StartJob followed in time: its
        coordinator stopped while launching it."""
        running = self.jobs.expire(job_id, prepared_at)
        if running is None:
            return
        running.mailbox.close("never started")
        with job_context(job_id):
            log.warning(
                "party %s: dropped the job: prepared but never started", self.config.party_id
            )

    # --- data plane ----------------------------------------------------------------

    def admit(self, job_id: str, sender: str, receiver: str, tag: str, size: int) -> Arrival | None:
        """Take one envelope of a job or an online scoring session from its header, before
        its payload is read (`Endpoint.admit`, which lists what it raises); None for a
        duplicate tag."""
        return self.endpoint.admit(job_id, sender, receiver, tag, size)

    def check_peers(self, peers: dict[str, str]) -> list[PingResult]:
        """`vfl doctor`'s data-plane check: push a ping to each peer, at the address its
        config's `peers:` names, else the one given (as a job's addresses are chosen)."""
        return self.endpoint.check_peers({p: self.config.peers.get(p, a) for p, a in peers.items()})

    def _locate(self, job_id: str, sender: str, tag: str) -> Mailbox | None:
        """The mailbox of job `job_id`, else of scoring session `job_id`, if `sender` is
        in it; None if neither is here with `sender` in it (`transport.endpoint.Locate`).

        Raises:
            JobError: the job, with `sender` in it, ended here.
        """
        mailbox = self.jobs.mailbox(job_id, sender, tag)
        if mailbox is None:
            return self.online.mailbox(job_id, sender)
        return mailbox

    # --- shutdown ------------------------------------------------------------------

    def announce_stop(self, reason: str, timeout: float) -> None:
        """Tell the coordinator, for every job started here, that this daemon stops as
        planned (`reason`, e.g. "its operator stopped the daemon (SIGTERM)"), and wait up
        to `timeout` seconds for it to take the reports: the jobs pause at once, named
        for what happened, not seconds later as a party that stopped answering."""
        if self._coordinator is None:
            return
        party = self.config.party_id
        settled = [
            self._coordinator.post(
                pb.ReportProgressRequest(
                    job_id=job_id, party_id=party, stopping=pb.PartyStopping(reason=reason)
                )
            )
            for job_id in sorted(self.jobs.started())
        ]
        deadline = time.monotonic() + timeout
        for event in settled:
            event.wait(max(0.0, deadline - time.monotonic()))
        if settled:
            log.info("party %s: told the coordinator it stops (%s)", party, reason)

    def stopping(self) -> None:
        """The daemon is about to stop its jobs and its server: from now on peers'
        envelopes are refused as unavailable (`ShuttingDown`), so that their jobs pause
        instead of failing on a job this party ended only because it stops, and a job
        it was loading is answered as unavailable too."""
        self.jobs.stopping()
        self.endpoint.stop_taking()

    def close(self) -> None:
        """Release the executor (its local processes, or its Ray connection) and the kept
        obfuscator pools (their refills and helper processes)."""
        self.compute.close()
        self.guard.stop()

    # --- a job's thread ------------------------------------------------------------

    def _run(self, job_id: str, running: RunningJob) -> None:
        with job_context(job_id):
            self._run_job(job_id, running)

    def _run_job(self, job_id: str, running: RunningJob) -> None:
        party = self.config.party_id
        reporter = MeteredReporter(
            CoordinatorReporter(
                self._coordinator,
                job_id,
                party,
                lambda: self.abort(job_id, "cancelled by the coordinator"),
            ),
            self.metrics,
            running.budget.check,
        )
        running.budget.started = time.monotonic()
        try:
            reporter.done(running.job.run(running.channel, reporter))
        except ChannelClosed as exc:
            log.info("party %s: stopped (%s)", party, exc)
        except (PartyError, SecureError, ContractError) as exc:  # bad input, named
            if exc is running.budget.failure:  # the guard reported it (`_fail_job`)
                log.info("party %s: stopped (%s)", party, exc)
                return
            log.warning("party %s: failed: %s", party, exc)
            pause = isinstance(exc, PartyError) and exc.pauses
            reporter.failed(failure_reason(exc, party), pause)
        except Exception as exc:  # noqa: BLE001 - any failure ends this job, not the daemon
            log.exception("party %s: failed unexpectedly", party)
            reporter.failed(failure_reason(exc, party))
        finally:
            self.jobs.finished(job_id, running)
            running.release()
            self.guard.close(running.budget)
