"""One model served online at its active party: micro-batches of ids, scored with every
passive party in one scoring session (`party.inference.session`), reopened when lost.

Ids the active party does not hold are answered at once, without contacting a passive
party; an id some passive party lacks gets its own error; the other ids of the same
request are scored either way. A table of a party's that cannot be looked up now (its
database fails) fails the micro-batch's requests with `TableUnavailable`, naming the
party and the dataset; the session stays open for the next micro-batch. A request
beyond the model's queue, or one its micro-batches cannot answer within its time, is
refused at once (`Overloaded`, `MicroBatcher`); opening a session is left out of the
micro-batches' measured cost.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from vfl.party.errors import ModelError, PeerUnavailable, RequestError, UnknownModel
from vfl.party.inference.batcher import MAX_QUEUED, MicroBatcher
from vfl.party.inference.model import LoadedModel
from vfl.party.inference.rows import Rows
from vfl.party.inference.session import MAX_BATCH_IDS, ActiveSession
from vfl.party.inference.source import Found
from vfl.secure.errors import ChannelError, ChannelTimeout, SecureError
from vfl.secure.wire.payload import MAX_ID_CHARS

log = logging.getLogger(__name__)

MAX_REQUEST_IDS = 1024  # ids in one Predict request
UNKNOWN_ID = "unknown_id"  # the active party holds no row with this id
NOT_AT_PEER = "not_at_peer"  # a passive party holds no row with this id


@dataclass(frozen=True)
class IdResult:
    """One id's answer: its score columns, or why it was not scored."""

    id: str
    values: tuple[float, ...] = ()  # the numeric score columns (`Prediction.columns`)
    label: str = ""  # classification: the predicted class
    error: str = ""  # "" if scored, else UNKNOWN_ID or NOT_AT_PEER
    message: str = ""


@dataclass(frozen=True)
class Prediction:
    model_id: str
    columns: tuple[str, ...]
    results: tuple[IdResult, ...]  # in the request's order


# Opens a session for a model: (model, rows, session id) -> the active side, once every
# passive party has accepted (raises PeerUnavailable, ModelError, ConfigError).
Opener = Callable[[LoadedModel, Rows, str], ActiveSession]
Closer = Callable[[ActiveSession, str], None]  # ends a session at every party


class ServedModel:
    """A model loaded at its active party, with its rows, micro-batcher and session."""

    def __init__(
        self,
        model: LoadedModel,
        rows: Rows,
        opener: Opener,
        on_close: Closer,
        max_queued: int = MAX_QUEUED,
        present: Callable[[], None] = lambda: None,
    ) -> None:
        """Each micro-batch first calls `present` (which raises `UnknownModel` once the
        model was deleted) and reads again the tables whose files changed
        (`Rows.refreshed`); at most `max_queued` requests wait for one (more, or one the
        queue ahead would keep past its time: `Overloaded`)."""
        task = model.manifest.task
        if task is None:
            raise ModelError(f"the active party's part of model {model.model_id} has no task")
        self.model, self.rows, self.task = model, rows, task
        self._open, self._on_close, self._present = opener, on_close, present
        self._lock = threading.Lock()  # guards session and closed (unload vs the worker)
        self.session: ActiveSession | None = None
        self.closed = False
        self.columns = tuple(c for c in task.scores(np.zeros((1, task.out_dim))) if c != "class")
        me = model.manifest.party_id
        self.batcher: MicroBatcher[str, IdResult] = MicroBatcher(
            self._run,
            name=f"serve-{model.model_id}",
            max_queued=max_queued,
            busy=f"party '{me}' has {max_queued} requests waiting for model {model.model_id} "
            "(its config's scoring.queue)",
            late=f"party '{me}' cannot score one more request for model {model.model_id} "
            "within {within:.2g} s (its config's scoring.deadline_s, or the call's deadline)",
        )

    @property
    def model_id(self) -> str:
        return self.model.model_id

    def close(self, reason: str) -> None:
        """Fail the queued requests, end the session (at every passive party too) and
        close the tables' database connections."""
        gone = UnknownModel(f"model {self.model_id} is no longer served here: {reason}")
        with self._lock:
            self.closed = True
        self.batcher.close(gone)
        self._drop(reason)
        self.rows.close()

    def _run(self, ids: list[str]) -> dict[str, IdResult]:
        """One micro-batch (run by the batcher's worker)."""
        self._present()
        self.rows = self.rows.refreshed(self.model)
        found = self.rows.find(ids)
        me = self.model.manifest.party_id
        held = set(found.ids)
        results = {
            i: IdResult(i, error=UNKNOWN_ID, message=f"party '{me}' holds no row with id {i!r}")
            for i in ids
            if i not in held
        }
        for start in range(0, len(found.ids), MAX_BATCH_IDS):
            part = found.take(np.arange(start, min(start + MAX_BATCH_IDS, len(found.ids))))
            results.update(self._score(part, retry=True))
        return results

    def _score(self, found: Found, retry: bool) -> dict[str, IdResult]:
        """Score the rows `found` in the session. A session that served before and now
        cannot deliver (a passive party restarted, or dropped it while idle) is reopened
        once."""
        fresh, session = self._session()
        try:
            out, lacking = session.score(found)
        except ChannelTimeout as exc:
            self._drop(f"timed out: {exc}")
            raise PeerUnavailable(
                f"model {self.model_id}: a passive party did not answer in time: {exc}"
            ) from None
        except SecureError as exc:
            self._drop(f"failed: {exc}")
            if fresh or not retry or not isinstance(exc, ChannelError):
                raise PeerUnavailable(f"model {self.model_id}: scoring failed: {exc}") from None
            return self._score(found, retry=False)
        return self._results(list(found.ids), out, lacking)

    def _results(
        self, ids: list[str], out: np.ndarray, lacking: dict[int, list[str]]
    ) -> dict[str, IdResult]:
        columns = self.task.scores(out)
        labels = columns.pop("class", None)
        results = {}
        for pos, i in enumerate(ids):
            if pos in lacking:
                who = ", ".join(f"'{p}'" for p in lacking[pos])
                message = f"party {who} holds no row with id {i!r}"
                results[i] = IdResult(i, error=NOT_AT_PEER, message=message)
                continue
            values = tuple(float(columns[c][pos]) for c in self.columns)
            results[i] = IdResult(i, values, "" if labels is None else str(labels[pos]))
        return results

    def _session(self) -> tuple[bool, ActiveSession]:
        """The open session (False) or a new one (True).

        Raises:
            UnknownModel: the model was unloaded meanwhile.
            PeerUnavailable, ModelError, ConfigError: a passive party cannot join.
        """
        with self._lock:
            if self.closed:
                raise UnknownModel(f"model {self.model_id} is no longer served here")
            if self.session is not None:
                return False, self.session
        session_id = f"score-{self.model_id}-{secrets.token_hex(4)}"
        begun = time.monotonic()
        session = self._open(self.model, self.rows, session_id)
        self.batcher.discount(time.monotonic() - begun)  # not what a micro-batch costs
        with self._lock:
            if not self.closed:
                self.session = session
                log.info("model %s: scoring session %s open", self.model_id, session_id)
                return True, session
        self._on_close(session, "the model was unloaded")
        raise UnknownModel(f"model {self.model_id} is no longer served here")

    def _drop(self, reason: str) -> None:
        with self._lock:
            session, self.session = self.session, None
        if session is not None:
            log.info("model %s: scoring session ended (%s)", self.model_id, reason)
            self._on_close(session, reason)


def check_request(model_id: str, ids: list[str]) -> None:
    """Raises:
    RequestError: no ids, too many, or an empty or overlong id."""
    if not ids:
        raise RequestError(f"a prediction with model {model_id} needs at least one id")
    if len(ids) > MAX_REQUEST_IDS:
        raise RequestError(
            f"{len(ids)} ids in one request; send at most {MAX_REQUEST_IDS} per request"
        )
    if any(not 0 < len(i) <= MAX_ID_CHARS for i in ids):
        raise RequestError(f"an id is empty or longer than {MAX_ID_CHARS} characters")
