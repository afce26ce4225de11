"""The party daemon's logic: registered jobs, their mailboxes and training threads.

The servicer (`party/servicer.py`) only translates between protobufs and these calls;
every domain error is a `PartyError` or `SecureError` that the servicer maps to a status.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from vfl.contract.errors import ContractError, SpecError
from vfl.contract.logs import job_context
from vfl.contract.spec import JobSpec, NetworkSpec
from vfl.party.config import PartyConfig
from vfl.party.errors import JobError, PartyError, ShuttingDown, shareable
from vfl.party.inference.batch import PredictJob
from vfl.party.inference.online import OnlineScoring
from vfl.party.job import PartyJob
from vfl.party.metrics import MeteredReporter, PartyMetrics
from vfl.party.report_sender import ReportSender
from vfl.party.reporting import CoordinatorReporter
from vfl.party.state import StateDir
from vfl.party.state.models import Manifest, ModelStore
from vfl.party.transport.audit import AuditLog
from vfl.party.transport.grpc_channel import GrpcChannel
from vfl.party.transport.ping import PING_JOB, PingResult, ping_peers
from vfl.party.transport.scoring import ScoringPeers
from vfl.party.transport.wan import ShapedChannel
from vfl.proto.rpc import PeerClients
from vfl.secure.channel import EnvelopeHook, Mailbox, decode_payload
from vfl.secure.errors import ChannelClosed, PayloadError, SecureError
from vfl.secure.executor import make_executor
from vfl.secure.paillier.pool_cache import PoolCache
from vfl.secure.source_layers.crypto import keep_saved_tables

log = logging.getLogger(__name__)

PREPARED_TTL_S = 60.0  # a prepared job not started within max(this, train.timeout_s) is dropped
ENDED_MEMORY = 1000  # ended jobs remembered, so late or replayed envelopes get a clear error


@dataclass(frozen=True)
class DaemonOptions:
    """Operator settings of a party daemon (flags of `vfl party serve`)."""

    audit_dir: str | None = None  # log every envelope (the wire audit, docs/security.md)
    network: NetworkSpec | None = None  # emulate a WAN on every job's data plane
    scoring_timeout_s: float = 10.0  # online scoring: longest wait for a peer's envelope


@dataclass
class RunningJob:
    job: PartyJob | PredictJob
    mailbox: Mailbox
    channel: GrpcChannel | ShapedChannel
    thread: threading.Thread | None = None
    state: str = "PREPARED"
    prepared_at: float = field(default_factory=time.monotonic)


class PartyDaemon:
    """Holds the jobs of one party; thread-safe."""

    def __init__(
        self,
        config: PartyConfig,
        clients: PeerClients,
        coordinator: ReportSender | None,  # delivers reports to the coordinator
        options: DaemonOptions | None = None,
    ) -> None:
        self.config = config
        self.options = options or DaemonOptions()
        self._clients = clients
        self._coordinator = coordinator
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._jobs: dict[str, RunningJob] = {}
        self._preparing: set[str] = set()  # jobs whose PrepareJob call is loading data
        self._aborted_loading: set[str] = set()  # of those, jobs aborted meanwhile
        self._ended: dict[str, str] = {}  # job id -> how it ended (insertion-ordered)
        self._stopping = False  # `stopping()` was called: envelopes are refused
        self.state = None if config.state_dir is None else StateDir.create(config.state_dir)
        # the party's executor, shared by its jobs (a Ray one joins its cluster at the first
        # job), and the obfuscator pools it keeps for them, filled while no job runs
        self.executor = make_executor(config.compute)
        compute = config.compute
        if compute.kept_keys:
            self.executor.pools = PoolCache(compute.kept_keys, compute.kept_obfuscators)
        self._busy = 0  # jobs running; the kept pools refill while there is none
        self._idle(True)
        if self.executor.pools is not None and self.state is not None:
            threading.Thread(target=self._keep_model_pools, name="kept-pools", daemon=True).start()
        self.address = ""  # where peers reach this daemon (set once it serves)
        pools = self.executor.pools
        self.metrics = PartyMetrics(  # served by `--metrics`
            self.jobs_by_state, dict if pools is None else pools.ready_counts
        )
        timeout = self.options.scoring_timeout_s
        self.online = OnlineScoring(
            config,
            self.state,
            self._session_channel,
            ScoringPeers(clients, timeout),
            lambda: self.address,
            timeout,
            self.executor,
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
        return [] if self.state is None else ModelStore(self.state).list()

    def delete_model(self, model_id: str) -> bool:
        """Drop this party's part of `model_id`; returns whether it held one.

        Raises:
            ModelError: `model_id` cannot be a model's id.
        """
        if self.state is None:
            return False
        self.online.unload(model_id, "deleted")  # no scoring from an in-memory copy
        held = ModelStore(self.state).delete(model_id)
        if held:
            log.info("party %s: dropped its part of model %s", self.config.party_id, model_id)
        return held

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
        with self._lock:  # a slow load must not look like a lost job to the coordinator
            self._preparing.add(job_id)
        try:
            job: PartyJob | PredictJob
            if spec.predict is not None:
                job = PredictJob(
                    job_id,
                    spec,
                    me,
                    self.config.datasets,
                    self.state,
                    self.config.scores_dir,
                    self.executor,
                )
            else:
                job = PartyJob(
                    job_id,
                    spec,
                    me,
                    self.config.datasets,
                    self.state,
                    resume_round,
                    self.metrics.instruments(),
                    self.executor,
                )
            table = job.prepare()
        finally:
            with self._lock:
                self._preparing.discard(job_id)
                aborted = job_id in self._aborted_loading
                self._aborted_loading.discard(job_id)
        if aborted:
            raise JobError(f"job {job_id} was aborted while party '{me}' loaded its data")
        addresses = {**peers, **self.config.peers}
        missing = [p.id for p in spec.parties if p.id != me and p.id not in addresses]
        if missing:
            raise JobError(
                f"no address for peer(s) {missing}; add them under 'peers' in "
                "the party config or start them against the same coordinator"
            )
        if isinstance(job, PartyJob):
            job.peers = {p.id: addresses[p.id] for p in spec.parties if p.id != me}
        mailbox = Mailbox()
        channel = self._channel(job_id, spec, mailbox, addresses)
        with self._lock:
            old = self._jobs.get(job_id)
            if old is not None and old.thread is not None:
                raise JobError(f"job {job_id} is already running on party '{me}'")
            self._ended.pop(job_id, None)
            running = RunningJob(job, mailbox, channel)
            self._jobs[job_id] = running
        ttl = max(spec.train.timeout_s, PREPARED_TTL_S)
        expiry = threading.Timer(ttl, self._expire_if_never_started, (job_id, running.prepared_at))
        expiry.daemon = True
        expiry.start()
        log.info("party %s: prepared (%d rows)", me, table.rows)

    def start(self, job_id: str) -> None:
        with self._lock:
            running = self._get(job_id)
            if running.thread is not None:
                return  # idempotent
            running.thread = threading.Thread(
                target=self._run, args=(job_id, running), name=f"job-{job_id}", daemon=True
            )
            running.state = "RUNNING"
            self._busy += 1
            if self._busy == 1:
                self._idle(False)
            running.thread.start()
            self._threads.append(running.thread)

    def join_jobs(self, timeout: float) -> None:
        """Wait for job threads to finish (after `abort`), so none outlives the daemon."""
        deadline = time.monotonic() + timeout
        with self._lock:
            threads = [t for t in self._threads if t.is_alive()]
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def abort(self, job_id: str, reason: str) -> None:
        with self._lock:
            if job_id in self._preparing:
                self._aborted_loading.add(job_id)
            running = self._jobs.pop(job_id, None)
            if running is not None:
                self._ended_as(job_id, f"aborted: {reason or 'by the coordinator'}")
        if running is not None:
            running.mailbox.close(reason or "aborted by the coordinator")
            log.info("party %s: aborted (%s)", self.config.party_id, reason or "by the coordinator")

    def running_jobs(self) -> list[str]:
        """Jobs this party holds: loading, prepared, started, or ended with a final report
        the coordinator has not acknowledged yet."""
        with self._lock:
            return sorted(set(self._jobs) | self._preparing | self._finishing())

    def jobs_by_state(self) -> dict[str, int]:
        """How many jobs this party holds: loading data, prepared, running."""
        with self._lock:
            running = sum(1 for r in self._jobs.values() if r.thread is not None)
            return {
                "loading": len(self._preparing),
                "prepared": len(self._jobs) - running,
                "running": running,
            }

    def started_jobs(self) -> list[str]:
        """Jobs whose training StartJob started (also those ended but not yet reported:
        a restarted coordinator waits for their final report instead of pausing them)."""
        with self._lock:
            started = {j for j, r in self._jobs.items() if r.thread is not None}
            return sorted(started | self._finishing())

    def _finishing(self) -> set[str]:
        return set() if self._coordinator is None else set(self._coordinator.pending_final())

    def _expire_if_never_started(self, job_id: str, prepared_at: float) -> None:
        """Drop a prepared job (and its table) that no StartJob followed in time: its
        coordinator stopped while launching it."""
        with self._lock:
            running = self._jobs.get(job_id)
            if running is None or running.prepared_at != prepared_at or running.thread is not None:
                return
            del self._jobs[job_id]
            self._ended_as(job_id, "expired: never started")
        running.mailbox.close("never started")
        with job_context(job_id):
            log.warning(
                "party %s: dropped the job: prepared but never started", self.config.party_id
            )

    # --- data plane ----------------------------------------------------------------

    def push(self, job_id: str, sender: str, receiver: str, tag: str, data: bytes) -> bool:
        """Deliver one envelope of a job or an online scoring session; returns False for
        a duplicate tag.

        Raises:
            JobError: unknown job, wrong receiver, or a sender that is not in the job.
            AccessDenied: a sender that is not in the scoring session.
        """
        if receiver != self.config.party_id:
            raise JobError(
                f"envelope for party '{receiver}' reached party "
                f"'{self.config.party_id}'; check the peer addresses"
            )
        if job_id == PING_JOB:
            return self._answer_ping(sender, tag, data)
        with self._lock:
            if self._stopping:
                raise ShuttingDown(
                    f"party '{receiver}' is shutting down; envelope '{tag}' is not taken "
                    "(the job pauses and can resume once the party is back)"
                )
            if job_id in self._ended:
                raise JobError(
                    f"job {job_id} already ended on party '{receiver}' ({self._ended[job_id]}); "
                    f"envelope '{tag}' from '{sender}' came late or was replayed and is dropped"
                )
            running = self._jobs.get(job_id)
        if running is None:
            fresh = self.online.deliver(job_id, sender, tag, data)
            if fresh is None:
                raise JobError(f"job {job_id} is not known to party '{receiver}'")
            return fresh
        if sender not in {p.id for p in running.job.spec.parties} or sender == receiver:
            raise JobError(f"party '{sender}' is not a peer in job {job_id}")
        return running.mailbox.put(sender, tag, data)

    def check_peers(self, peers: dict[str, str]) -> list[PingResult]:
        """`vfl doctor`'s data-plane check: push a ping to each peer, at the address its
        config's `peers:` names, else the one given (as a job's addresses are chosen)."""
        addresses = {p: self.config.peers.get(p, a) for p, a in peers.items()}
        me = self.config.party_id
        return ping_peers(me, addresses, self._clients, self._hook(PING_JOB))

    def _answer_ping(self, sender: str, tag: str, data: bytes) -> bool:
        """Take a peer's ping (a `Ping` payload and nothing else).

        Raises:
            PayloadError: the envelope is not a ping.
        """
        if decode_payload(data).WhichOneof("kind") != "ping":
            raise PayloadError(f"envelope '{tag}' for job {PING_JOB} must be a ping")
        self._hook(PING_JOB)("received", sender, self.config.party_id, tag, data)
        return True

    # --- internals ---

    def _channel(self, job_id: str, spec: JobSpec, mailbox: Mailbox, addresses: dict[str, str]):
        me = self.config.party_id
        channel = GrpcChannel(
            me,
            job_id,
            mailbox,
            addresses,
            self._clients,
            hook=self._hook(job_id),
            send_timeout=spec.train.timeout_s,
        )
        profile = spec.network if spec.network is not None else self.options.network
        return channel if profile is None else ShapedChannel(channel, profile)

    def _session_channel(
        self, session_id: str, mailbox: Mailbox, addresses: dict[str, str]
    ) -> GrpcChannel:
        """The data-plane channel of an online scoring session (audited like a job's)."""
        return GrpcChannel(
            self.config.party_id,
            session_id,
            mailbox,
            addresses,
            self._clients,
            hook=self._hook(session_id),
            send_timeout=self.options.scoring_timeout_s,
        )

    def _hook(self, job_id: str) -> EnvelopeHook:
        """What sees each envelope of a job or session: the metrics, and the audit log."""
        count = self.metrics.envelope
        if not self.options.audit_dir:
            return count
        audit = AuditLog(self.options.audit_dir, self.config.party_id, job_id)

        def both(direction: str, sender: str, receiver: str, tag: str, data: bytes) -> None:
            count(direction, sender, receiver, tag, data)
            audit(direction, sender, receiver, tag, data)

        return both

    def _ended_as(self, job_id: str, how: str) -> None:
        """Remember how a job ended (call with the lock held); forget the oldest."""
        self._ended[job_id] = how
        while len(self._ended) > ENDED_MEMORY:
            del self._ended[next(iter(self._ended))]

    def _keep_model_pools(self) -> None:
        """Keep the obfuscator pools of the newest blindfl models' peer keys, so that the
        first prediction after a restart finds them filled (they fill while no job runs)."""
        pools, me = self.executor.pools, self.config.party_id
        assert pools is not None and self.state is not None
        store = ModelStore(self.state)
        newest = [m for m in store.list() if m.protocol == "blindfl"][-pools.keys :]
        for manifest in newest:  # oldest first: the newest ends most recently used
            try:
                _, part = store.load(manifest.model_id, me)
                owners = keep_saved_tables(pools, part, me)
            except (PartyError, SecureError) as exc:
                log.warning("party %s: model %s: no kept pools (%s)", me, manifest.model_id, exc)
                continue
            log.info("party %s: keeps obfuscators for %s (%s)", me, owners, manifest.model_id)

    def _idle(self, idle: bool) -> None:
        """Open (no job runs) or close the gate of the kept obfuscator pools' refills."""
        if self.executor.pools is not None:
            self.executor.pools.set_idle(idle)

    def stopping(self) -> None:
        """The daemon is about to stop its jobs and its server: from now on peers'
        envelopes are refused as unavailable (`ShuttingDown`), so that their jobs pause
        instead of failing on a job this party ended only because it stops."""
        with self._lock:
            self._stopping = True

    def close(self) -> None:
        """Release the executor (its local processes, or its Ray connection) and the kept
        obfuscator pools (their refills and helper processes)."""
        if self.executor.pools is not None:
            self.executor.pools.close()
        self.executor.close()

    def _get(self, job_id: str) -> RunningJob:
        if job_id not in self._jobs:
            raise JobError(f"job {job_id} is not known to party '{self.config.party_id}'")
        return self._jobs[job_id]

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
        )
        try:
            reporter.done(running.job.run(running.channel, reporter))
        except ChannelClosed as exc:
            log.info("party %s: stopped (%s)", party, exc)
        except (PartyError, SecureError, ContractError) as exc:  # bad input, named
            log.warning("party %s: failed: %s", party, exc)
            reporter.failed(f"party '{party}': {shareable(exc, party)}")
        except Exception as exc:  # noqa: BLE001 - any failure ends this job, not the daemon
            log.exception("party %s: failed unexpectedly", party)
            reporter.failed(f"party '{party}': {shareable(exc, party)}")
        finally:
            with self._lock:
                if self._jobs.get(job_id) is running:
                    del self._jobs[job_id]
                    self._ended_as(job_id, "finished")
                self._busy -= 1
                if not self._busy:
                    self._idle(True)
            running.mailbox.close("job finished")
            if isinstance(running.channel, ShapedChannel):
                running.channel.close()
