"""Online scoring at one party daemon (docs/architecture.md, "Online scoring").

At a model's active party, `predict(model_id, ids, caller)` loads the model on its first
request and keeps it (`ServedModel`: rows indexed by id, a micro-batcher, a scoring
session with every passive party) until `unload(model_id)` or the daemon stops. At a
passive party, `open_session` (the `OpenScoring` RPC) joins a session of the model's
active party (`PassiveSessions`, party/inference/passive_sessions.py). Sessions'
envelopes arrive by Push like a job's, in the session's mailbox (`mailbox`), bounded as
a job's is (`limits.mailbox_mb`).

Which rows: each party looks ids up in the datasets of its own config marked `serve:
true`, then in the dataset the model was trained on, as its config names it now; the
first that holds an id gives its row (`party.inference.rows`). Each table file is read
when the model is loaded and read again when it changes, and a database dataset is
queried for the ids of each micro-batch, so a changed row is scored with its new values
and people added to the tables are found without a restart. A database's lookup is cut
after `lookup_timeout_s` (a quarter of the scoring timeout, at most
`sql_lookup.LOOKUP_TIMEOUT_S`). Where the peers are: a party config's `peers:` first,
else (active party) where the coordinator says they registered last, asked at each
session (a passive party restarted on another port or host is found there), else the
addresses the model was trained with; a passive party answers at the active party's own
address in `OpenScoring`.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

from vfl.party.config import PartyConfig
from vfl.party.errors import (
    AccessDenied,
    ConfigError,
    ModelError,
    PeerUnavailable,
    UnknownModel,
)
from vfl.party.inference.model import LoadedModel
from vfl.party.inference.passive_sessions import ChannelFactory, Links, PassiveSessions
from vfl.party.inference.rows import Rows
from vfl.party.inference.serving import Prediction, ServedModel, check_request
from vfl.party.inference.session import (
    MAX_BATCH_IDS,
    ActiveSession,
    DriftSink,
    SilentReporter,
)
from vfl.party.inference.source import Problem
from vfl.party.state import StateDir
from vfl.party.state.model_store import MANIFEST, ModelStore
from vfl.party.tables.sql_lookup import LOOKUP_TIMEOUT_S
from vfl.party.transport.scoring import ScoringPeers
from vfl.secure.channel import Mailbox
from vfl.secure.executor import BlockExecutor

log = logging.getLogger(__name__)

MAX_MANIFEST_PATHS = 4096  # model ids whose manifest's path is kept (`_holds`)


class OnlineScoring:
    """A daemon's online scoring, at both roles; thread-safe."""

    def __init__(
        self,
        config: PartyConfig,
        state: StateDir | None,
        channel: ChannelFactory,
        peers: ScoringPeers,
        address: Callable[[], str],
        timeout_s: float,
        executor: BlockExecutor | None = None,
        on_drift: Callable[[str, dict[str, int]], None] | None = None,
        locate: Callable[[str], dict[str, str]] | None = None,
    ) -> None:
        """`executor`: the party's (its processes and kept obfuscator pools), for every
        session's Paillier work; None: each session's own. `on_drift`: told (model id,
        drift counts) of the rows each micro-batch scored that drifted. `locate`: where a
        model's parties registered last ({} when that cannot be told now)."""
        self.config, self.state, self.timeout_s = config, state, timeout_s
        # a database's lookup is cut well before a peer would stop waiting for its answer
        self.lookup_timeout_s = min(LOOKUP_TIMEOUT_S, timeout_s / 4)
        self.executor, self._on_drift = executor, on_drift
        self._channel, self._peers, self._address = channel, peers, address
        self._locate = locate or (lambda model_id: {})
        self._lock = threading.Lock()
        self._load_lock = threading.Lock()  # one model loads at a time
        self._served: dict[str, ServedModel] = {}
        self._manifests: dict[str, str] = {}  # model id -> its manifest's path
        self.links = Links(config.limits.mailbox_bytes)
        self.passive = PassiveSessions(
            config,
            state,
            channel,
            self.links,
            (timeout_s, self.lookup_timeout_s, executor),
            self._foreground,
            self._drift_sink,
        )

    def _drift_sink(self, model_id: str) -> DriftSink | None:
        on_drift = self._on_drift
        return None if on_drift is None else functools.partial(on_drift, model_id)

    def _foreground(self) -> AbstractContextManager[object]:
        """A scoring batch: the party's kept pools pause their filling meanwhile."""
        pools = None if self.executor is None else self.executor.pools
        return nullcontext() if pools is None else pools.foreground()

    @property
    def me(self) -> str:
        return self.config.party_id

    # --- the active party ----------------------------------------------------------

    def predict(
        self, model_id: str, ids: list[str], caller: str | None, deadline_s: float | None = None
    ) -> Prediction:
        """Score `ids` with model `model_id` (micro-batched with concurrent requests),
        admitted only if its micro-batch is estimated to end within the config's
        `scoring.deadline_s`, or within `deadline_s` (the call's own) if sooner; refused
        later if the batches turn out too slow to answer it within `deadline_s`.

        Raises:
            RequestError: no ids, too many, an empty or overlong id.
            UnknownModel: this party holds no such model (never trained here, deleted).
            ModelError: it holds it as a passive party, or its rows do not fit it.
            AccessDenied: `caller` may not score here.
            PeerUnavailable: a passive party did not answer (retry).
            Overloaded: the model's queue is full, or cannot answer it in time (at once;
                retry after its hint).
        """
        check_request(model_id, ids)
        served = self._serve(model_id)
        self._check_scorer(served.model, caller)
        within = self.config.scoring.deadline_s
        if deadline_s is not None:
            within = min(within, deadline_s)
        timeout = 4 * self.timeout_s + 30
        try:
            by_id = served.batcher.submit(ids, timeout, within, deadline_s)
        except UnknownModel:
            if not self._holds(model_id):  # deleted: its batches fail until it is unloaded
                self.unload(model_id, "deleted")
            raise
        except TimeoutError:
            raise PeerUnavailable(f"model {model_id}: no answer in time; retry") from None
        return Prediction(model_id, served.columns, tuple(by_id[i] for i in ids))

    def served(self, model_id: str) -> ServedModel | None:
        with self._lock:
            return self._served.get(model_id)

    def problems(self, model_id: str) -> dict[str, Problem]:
        """While `model_id` is served here (as active party, or in a passive party's open
        session): each table its scoring cannot use now, and why (`Rows.problems`)."""
        served = self.served(model_id)
        mine = {} if served is None else served.rows.problems()
        return {**self.passive.problems(model_id), **mine}

    def unload(self, model_id: str, reason: str = "unloaded") -> None:
        """Stop serving `model_id` here, as active or passive party (the model was deleted,
        or the daemon stops)."""
        with self._lock:
            served = self._served.pop(model_id, None)
        if served is not None:
            served.close(reason)
        for session_id in self.passive.of(model_id):
            self.passive.close(session_id, reason)

    def close_all(self, reason: str) -> None:
        with self._lock:
            models = set(self._served) | self.passive.models()
        for model_id in models:
            self.unload(model_id, reason)

    def _gone(self, model_id: str) -> UnknownModel:
        return UnknownModel(
            f"party '{self.me}' holds no model {model_id} (it was deleted, or trained "
            "without this party); list the models with `vfl models`"
        )

    def _serve(self, model_id: str) -> ServedModel:
        """The served model (each of its micro-batches checks that its manifest is still
        here: one look per batch, not per call), loaded on its first request."""
        served = self.served(model_id)
        if served is not None:
            return served
        if not self._holds(model_id):
            self.unload(model_id, "deleted")
            raise self._gone(model_id)
        with self._load_lock:  # others' loaded models are served meanwhile
            served = self.served(model_id)
            if served is None:
                model = LoadedModel.open(self.state, model_id, self.me)
                if model.manifest.role != "active":
                    active = model.spec.active.id
                    raise ModelError(
                        f"party '{self.me}' holds model {model_id} as a passive party; "
                        f"score at its active party '{active}'"
                    )
                rows = Rows.load(model, self.config.datasets, self.lookup_timeout_s)
                try:
                    queue = self.config.scoring.queue
                    present = functools.partial(self._present, model_id)
                    served = ServedModel(model, rows, self._open, self._end, queue, present)
                except Exception:
                    rows.close()
                    raise
                with self._lock:
                    self._served[model_id] = served
                log.info("party %s: serving model %s", self.me, model_id)
        return served

    def _present(self, model_id: str) -> None:
        """Raises `UnknownModel` if the manifest of `model_id` is gone (a micro-batch's
        check, on its worker)."""
        if not self._holds(model_id):
            raise self._gone(model_id)

    def _holds(self, model_id: str) -> bool:
        """Whether the model's manifest is here (a stat of a path made once per model: it
        runs at every call)."""
        if self.state is None:
            return False
        path = self._manifests.get(model_id)
        if path is None:
            path = str(ModelStore(self.state).folder(model_id) / MANIFEST)
            with self._lock:
                if len(self._manifests) >= MAX_MANIFEST_PATHS:
                    self._manifests.clear()
                self._manifests[model_id] = path
        return os.path.isfile(path)

    def _check_scorer(self, model: LoadedModel, caller: str | None) -> None:
        """Any identity of the federation but the model's passive parties may score (with
        `scorers:` in the party config, only those it lists, and never a passive party)."""
        if caller is None:
            return
        why = ""
        if caller in {p.id for p in model.spec.passives}:
            why = "it is a passive party of the model"
        elif self.config.scorers and caller not in self.config.scorers:
            why = "it is not among the party's `scorers`"
        if why:
            raise AccessDenied(
                f"'{caller}' may not score with model {model.model_id} at party '{self.me}': {why}"
            )

    def _open(self, model: LoadedModel, rows: Rows, session_id: str) -> ActiveSession:
        """A session with every passive party of `model` (the `ServedModel`'s opener).

        Raises:
            ConfigError: no address for a passive party.
            PeerUnavailable, ModelError: a passive party did not answer, or refused.
        """
        passives = [p.id for p in model.spec.passives]
        current = self._locate(model.model_id)
        addresses = {**model.manifest.peers, **current, **self.config.peers}
        missing = [p for p in passives if p not in addresses]
        if missing:
            raise ConfigError(
                f"party '{self.me}' has no address for {missing} to score model "
                f"{model.model_id}; add them under 'peers' in its config"
            )
        where = {p: addresses[p] for p in passives}
        link = self.links.new(frozenset(passives))
        channel = self._channel(session_id, link.mailbox, where)
        scorer = model.scorer(
            channel, rows.inputs, SilentReporter(), MAX_BATCH_IDS, self.timeout_s, self.executor
        )
        session = ActiveSession(
            session_id,
            channel,
            scorer,
            where,
            self.timeout_s,
            self._foreground,
            self._drift_sink(model.model_id),
        )
        self.links.add(session_id, link)
        try:
            for peer in passives:
                self._peers.open(peer, addresses[peer], model.model_id, session_id, self._address())
        except Exception:
            self._end(session, "a passive party did not join")
            raise
        return session

    def _end(self, session: ActiveSession, reason: str) -> None:
        """End an active session here and, in the background, at its passive parties."""
        session_id = session.session_id
        link = self.links.pop(session_id)
        if link is not None:
            link.mailbox.close(reason)
        session.close()

        def tell() -> None:
            for peer, address in session.passives.items():
                self._peers.close(peer, address, session_id, reason)

        threading.Thread(target=tell, name=f"end-{session_id}", daemon=True).start()

    # --- a passive party (`PassiveSessions`) --------------------------------------

    def open_session(
        self, model_id: str, session_id: str, caller: str | None, reply_to: str
    ) -> None:
        """Join session `session_id` of model `model_id` as a passive party (see
        `PassiveSessions.open`)."""
        self.passive.open(model_id, session_id, caller, reply_to)

    def close_session(self, session_id: str, reason: str, caller: str | None = None) -> None:
        """End a passive party's session (see `PassiveSessions.close`)."""
        self.passive.close(session_id, reason, caller)

    def mailbox(self, session_id: str, sender: str) -> Mailbox | None:
        """The mailbox of session `session_id` for `sender`'s envelopes (either role)."""
        return self.links.mailbox(session_id, sender)
