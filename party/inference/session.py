"""A scoring session: one stored model, its active party and every passive party, scoring
rows by id in micro-batches over the data plane (docs/protocols.md, "Online scoring").

Micro-batch n of a session (tags `score/b<n>/...`, the session id as the job id):

    B -> A_k   score/b<n>/ids     kind `ids`: the ids B holds, in B's order
    A_k -> B   score/b<n>/lacks   kind `indices`: positions of the ids A_k holds no row of;
                                  or kind `control` {unavailable: why}: A_k could not
                                  look them up (a database of its failed)
    B <-> A_k  score/b<n>/...     the model's forward for those rows (`ScoringRole.score`)

Each party finds the rows of the ids in its own tables (`party.inference.rows`: its
serving tables, then the model's training table, each read again when its file changed,
a database queried for these ids). A passive party scores a row of zeros in place of an
id it lacks, so every party runs the same forward and no passive party learns which ids
another one lacks; B drops those rows. A passive party whose lookup failed scores zeros
for every id and says why (the error's public form): the session stays in step, and B
fails the micro-batch with `TableUnavailable` naming that party and its dataset.
Passive parties never receive an output or a score. Both sides are transport-free: the
daemon hands in the session's `Channel` and `Mailbox`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

import numpy as np
from vfl.party.errors import ModelError, TableUnavailable
from vfl.party.inference.model import LoadedModel
from vfl.party.inference.rows import Rows
from vfl.party.inference.source import Found
from vfl.party.kinds import ScoringRole
from vfl.party.training.context import Reporter
from vfl.secure.channel import Channel, Mailbox
from vfl.secure.errors import ChannelClosed, ChannelTimeout
from vfl.secure.wire.payload import (
    control_from_payload,
    control_to_payload,
    ids_from_payload,
    ids_to_payload,
    indices_from_payload,
    indices_to_payload,
)

log = logging.getLogger(__name__)
Foreground = Callable[[], AbstractContextManager[object]]

MAX_BATCH_IDS = 64  # ids per exchange; a larger micro-batch runs as several exchanges
PASSIVE_IDLE_S = 3600.0  # a passive party drops a session no batch used for this long
UNAVAILABLE = "unavailable"  # the field of a passive party's `lacks` reply that failed
MAX_WHY_CHARS = 500  # of a passive party's reason, passed on to the caller


def batch_tag(n: int) -> str:
    return f"score/b{n}"


class SilentReporter(Reporter):
    """The `Reporter` of a scorer: an online session reports nothing to the coordinator
    (every method is the protocol's, which does nothing)."""


DriftSink = Callable[[dict[str, int]], None]  # told the drift counts of rows scored


def count_drift(found: Found, sink: DriftSink | None) -> None:
    """Tell `sink` the drift counts of the rows `found`, if any drifted."""
    if sink is None or not len(found.drift):
        return
    counts = found.drift_counts()
    if any(counts.values()):
        sink(counts)


class ActiveSession:
    """The active party's side of a session: `score(ids)` runs one micro-batch with every
    passive party. Not thread-safe: one worker calls it, batch after batch."""

    def __init__(
        self,
        session_id: str,
        channel: Channel,
        scorer: ScoringRole,
        passives: dict[str, str],  # party id -> address
        timeout: float,
        foreground: Foreground = nullcontext,
        count_drift: DriftSink | None = None,
    ) -> None:
        """`foreground`: marks each micro-batch as latency-bound (background work of the
        party, such as filling its kept obfuscator pools, pauses meanwhile); `count_drift`:
        told the drift counts of each micro-batch's rows that drifted."""
        self.session_id, self.channel, self.scorer = session_id, channel, scorer
        self.passives, self.timeout, self.foreground = passives, timeout, foreground
        self.count_drift = count_drift
        self.batches = 0

    def score(self, found: Found) -> tuple[np.ndarray, dict[int, list[str]]]:
        """The model's outputs for the rows `found` here (at most `MAX_BATCH_IDS`), and
        for the positions some passive party lacks, the parties that lack it (those
        outputs are meaningless).

        Raises:
            ChannelError, PayloadError: a passive party failed or sent a malformed reply.
        """
        with self.foreground():
            return self._score(found)

    def _score(self, found: Found) -> tuple[np.ndarray, dict[int, list[str]]]:
        self.batches += 1
        tag = batch_tag(self.batches)
        for peer in self.passives:
            self.channel.send(peer, f"{tag}/ids", ids_to_payload(list(found.ids)))
        count_drift(found, self.count_drift)
        out = self.scorer.score(tag, found.inputs, np.arange(len(found.ids)))
        lacking: dict[int, list[str]] = {}
        failed: list[str] = []
        for peer in self.passives:
            reply = self.channel.recv(peer, f"{tag}/lacks", self.timeout)
            if reply.WhichOneof("kind") == "control":
                failed.append(control_from_payload(reply, [UNAVAILABLE])[UNAVAILABLE])
                continue
            for pos in indices_from_payload(reply, len(found.ids)):
                lacking.setdefault(int(pos), []).append(peer)
        if failed:
            raise TableUnavailable("; ".join(why[:MAX_WHY_CHARS] for why in failed))
        if out is None:
            raise ModelError(f"session {self.session_id}: the scorer is not the active party's")
        return out, lacking

    def close(self) -> None:
        self.scorer.close()


class PassiveSession:
    """A passive party's side of a session: `serve()` answers micro-batches until the
    session is closed or idle for `PASSIVE_IDLE_S`."""

    def __init__(
        self,
        session_id: str,
        model: LoadedModel,
        channel: Channel,
        mailbox: Mailbox,
        scorer: ScoringRole,
        rows: Rows,
        idle_s: float = PASSIVE_IDLE_S,
        foreground: Foreground = nullcontext,
        count_drift: DriftSink | None = None,
    ) -> None:
        """`foreground`: as for `ActiveSession`, around each micro-batch once its ids came.
        Each micro-batch first reads again the tables whose files changed
        (`Rows.refreshed`)."""
        self.foreground = foreground
        self.session_id, self.model = session_id, model
        self.channel, self.mailbox, self.scorer, self.rows = channel, mailbox, scorer, rows
        self.active = model.spec.active.id
        self.idle_s, self.count_drift = idle_s, count_drift
        self.batches = 0

    @property
    def me(self) -> str:
        return self.channel.party_id

    def serve(self) -> None:
        me = self.me
        try:
            while True:
                self._answer(batch_tag(self.batches + 1))
                self.batches += 1
        except ChannelTimeout:
            log.info("party %s: scoring session %s idle, closed", me, self.session_id)
        except ChannelClosed as exc:
            log.info("party %s: scoring session %s closed (%s)", me, self.session_id, exc)
        except Exception as exc:  # noqa: BLE001 - a failed session never stops the daemon
            log.warning("party %s: scoring session %s failed: %s", me, self.session_id, exc)
        finally:
            self.mailbox.close("scoring session ended")
            self.scorer.close()
            self.rows.close()

    def _answer(self, tag: str) -> None:
        """One micro-batch: the ids, which of them this party lacks, the forward."""
        payload = self.channel.recv(self.active, f"{tag}/ids", self.idle_s)
        with self.foreground():
            self._forward(tag, ids_from_payload(payload, MAX_BATCH_IDS))

    def _forward(self, tag: str, ids: list[str]) -> None:
        self.rows = self.rows.refreshed(self.model)
        try:
            found, reply = self.rows.find(ids), None
        except TableUnavailable as exc:  # zeros for every id, and why
            log.warning("party %s: scoring session %s: %s", self.me, self.session_id, exc)
            found, reply = self.rows.none(), control_to_payload({UNAVAILABLE: exc.public})
        inputs, lacks = found.padded(ids)
        count_drift(found, self.count_drift)
        self.channel.send(self.active, f"{tag}/lacks", reply or indices_to_payload(lacks))
        self.scorer.score(tag, inputs, np.arange(len(ids)))

    def close(self, reason: str) -> None:
        self.mailbox.close(reason)
