"""A passive party's online scoring sessions (`OnlineScoring`'s passive half).

`PassiveSessions.open` (the `OpenScoring` RPC, accepted only from the model's active
party) loads the party's model part and its rows and answers the session's micro-batches
in a thread of its own, closing the model's older sessions; `close` (the `CloseScoring`
RPC) ends one. A session's envelopes arrive by Push into its mailbox, which `Links` (one
table for both roles' sessions) hands the daemon by session id and sender.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from vfl.party.config import PartyConfig
from vfl.party.errors import AccessDenied, ConfigError, ModelError
from vfl.party.inference.model import LoadedModel
from vfl.party.inference.rows import Rows
from vfl.party.inference.session import MAX_BATCH_IDS, DriftSink, PassiveSession, SilentReporter
from vfl.party.inference.source import Problem
from vfl.party.state import StateDir
from vfl.secure.channel import Channel, Mailbox
from vfl.secure.executor import BlockExecutor

log = logging.getLogger(__name__)

SESSION_TAGS = 100_000  # tags a session's mailbox remembers to drop replays

# (session id, mailbox, peer addresses) -> the session's data-plane channel
ChannelFactory = Callable[[str, Mailbox, dict[str, str]], Channel]


@dataclass
class Link:
    """A session's end at this party: its mailbox and who may send to it."""

    mailbox: Mailbox
    peers: frozenset[str]


class Links:
    """Every open session's `Link` at this party, active or passive; thread-safe."""

    def __init__(self, mailbox_bytes: int) -> None:
        self._mailbox_bytes = mailbox_bytes
        self._lock = threading.Lock()
        self._links: dict[str, Link] = {}

    def new(self, peers: frozenset[str]) -> Link:
        """A new session's link: a mailbox that remembers the last `SESSION_TAGS` tags."""
        return Link(Mailbox(self._mailbox_bytes, max_seen=SESSION_TAGS), peers)

    def add(self, session_id: str, link: Link) -> None:
        with self._lock:
            self._links[session_id] = link

    def pop(self, session_id: str) -> Link | None:
        with self._lock:
            return self._links.pop(session_id, None)

    def mailbox(self, session_id: str, sender: str) -> Mailbox | None:
        """The mailbox of session `session_id` for `sender`'s envelopes; None if no such
        session is open here with `sender` in it (one answer for both)."""
        with self._lock:
            link = self._links.get(session_id)
        if link is None or sender not in link.peers:
            return None
        return link.mailbox


class PassiveSessions:
    """A daemon's sessions as a passive party; thread-safe."""

    def __init__(
        self,
        config: PartyConfig,
        state: StateDir | None,
        channel: ChannelFactory,
        links: Links,
        scoring: tuple[float, float, BlockExecutor | None],
        foreground: Callable[[], AbstractContextManager[object]],
        drift_sink: Callable[[str], DriftSink | None],
    ) -> None:
        """`scoring`: (the peers' timeout, a database lookup's, the party's executor)."""
        self.config, self.state, self.links = config, state, links
        self._channel, self._foreground, self._drift_sink = channel, foreground, drift_sink
        self.timeout_s, self.lookup_timeout_s, self.executor = scoring
        self._lock = threading.Lock()
        self._open: dict[str, tuple[str, PassiveSession]] = {}  # session -> (model, it)

    @property
    def me(self) -> str:
        return self.config.party_id

    def models(self) -> set[str]:
        with self._lock:
            return {m for m, _ in self._open.values()}

    def of(self, model_id: str) -> list[str]:
        """The open sessions of `model_id`."""
        with self._lock:
            return [s for s, (m, _) in self._open.items() if m == model_id]

    def problems(self, model_id: str) -> dict[str, Problem]:
        with self._lock:
            sessions = [s for m, s in self._open.values() if m == model_id]
        return {name: p for s in sessions for name, p in s.rows.problems().items()}

    def open(self, model_id: str, session_id: str, caller: str | None, reply_to: str) -> None:
        """Join session `session_id` of model `model_id` (closing its older sessions).

        Raises:
            UnknownModel: this party holds no such model. ModelError: it holds it as the
                active party, or its rows do not fit it.
            AccessDenied: the caller is not the model's active party.
            ConfigError: no address to answer the active party at.
        """
        model = LoadedModel.open(self.state, model_id, self.me)
        active = model.spec.active.id
        if caller is not None and caller != active:
            raise AccessDenied(
                f"only the active party '{active}' of model {model_id} may open a scoring "
                f"session at party '{self.me}'; the caller is '{caller}'"
            )
        if model.manifest.role != "passive":
            raise ModelError(f"party '{self.me}' is the active party of model {model_id}")
        for old in self.of(model_id):
            self.close(old, "replaced by a new session")
        address = self.config.peers.get(active) or reply_to
        if not address:
            raise ConfigError(f"no address for party '{active}'; add it under 'peers'")
        rows = Rows.load(model, self.config.datasets, self.lookup_timeout_s)
        link = self.links.new(frozenset({active}))
        channel = self._channel(session_id, link.mailbox, {active: address})
        try:
            scorer = model.scorer(
                channel, rows.inputs, SilentReporter(), MAX_BATCH_IDS, self.timeout_s, self.executor
            )
        except Exception:
            rows.close()
            raise
        session = PassiveSession(
            session_id,
            model,
            channel,
            link.mailbox,
            scorer,
            rows,
            foreground=self._foreground,
            count_drift=self._drift_sink(model_id),
        )
        self.links.add(session_id, link)
        with self._lock:
            self._open[session_id] = (model_id, session)
        threading.Thread(
            target=self._serve,
            args=(session_id, session),
            name=f"score-{session_id}",
            daemon=True,
        ).start()
        log.info("party %s: joined scoring session %s of model %s", self.me, session_id, model_id)

    def close(self, session_id: str, reason: str, caller: str | None = None) -> None:
        """End a session (from its active party); unknown sessions are ignored.

        Raises:
            AccessDenied: `caller` is not the session's active party.
        """
        with self._lock:
            entry = self._open.get(session_id)
        if entry is None:
            return
        session = entry[1]
        if caller is not None and caller != session.active:
            raise AccessDenied(
                f"only party '{session.active}' may end scoring session {session_id}"
            )
        session.close(reason)

    def _serve(self, session_id: str, session: PassiveSession) -> None:
        try:
            session.serve()
        finally:
            self.links.pop(session_id)
            with self._lock:
                self._open.pop(session_id, None)
