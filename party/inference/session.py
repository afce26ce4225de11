"""A scoring session: one stored model, its active party and every passive party, scoring
rows by id in micro-batches over the data plane (docs/protocols.md, "Online scoring").

Micro-batch n of a session (tags `score/b<n>/...`, the session id as the job id):

    B -> A_k   score/b<n>/ids     kind `ids`: the ids B holds, in B's order
    A_k -> B   score/b<n>/lacks   kind `indices`: positions of the ids A_k holds no row of
    B <-> A_k  score/b<n>/...     the model's forward for those rows (`trainer.score`)

A passive party scores a row of zeros in place of an id it lacks, so every party runs the
same forward and no passive party learns which ids another one lacks; B drops those rows.
Passive parties never receive an output or a score. Both sides are transport-free: the
daemon hands in the session's `Channel` and `Mailbox`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace

import numpy as np
from vfl.contract.spec import TableSource
from vfl.party.data import Table
from vfl.party.errors import DataError, ModelError, PartyError
from vfl.party.inference.model import LoadedModel
from vfl.party.job import resolve_dataset
from vfl.party.preprocess import Drift
from vfl.party.training.context import Reporter
from vfl.party.training.models import Inputs
from vfl.party.training.trainers import Trainer
from vfl.secure.channel import Channel, Mailbox
from vfl.secure.errors import ChannelClosed, ChannelTimeout
from vfl.secure.wire.payload import (
    ids_from_payload,
    ids_to_payload,
    indices_from_payload,
    indices_to_payload,
)

log = logging.getLogger(__name__)
Foreground = Callable[[], AbstractContextManager[object]]

MAX_BATCH_IDS = 64  # ids per exchange; a larger micro-batch runs as several exchanges
PASSIVE_IDLE_S = 3600.0  # a passive party drops a session no batch used for this long


def batch_tag(n: int) -> str:
    return f"score/b{n}"


class SilentReporter(Reporter):
    """The `Reporter` of a scorer: an online session reports nothing to the coordinator
    (every method is the protocol's, which does nothing)."""


FileStamp = tuple[int, int, int]  # size, mtime (ns), inode of a dataset's file


def file_stamp(path: str) -> FileStamp | None:
    """What tells a changed file from the one read before (None: it is not there)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns, st.st_ino


DriftSink = Callable[[dict[str, int]], None]  # told the drift counts of rows scored


@dataclass(frozen=True)
class Rows:
    """A party's rows for online scoring: its model inputs and where each id lies; and,
    when they were read from a dataset's file (`load`), the party's datasets, that file
    and its stamp then (`reloaded` reads them anew once the file changed)."""

    inputs: Inputs
    index: dict[str, int]
    datasets: dict[str, TableSource] | None = None
    path: str | None = None
    stamp: FileStamp | None = None
    zero_row: bool = False
    drift: Drift = field(default_factory=Drift)

    @classmethod
    def load(cls, model: LoadedModel, datasets: dict[str, TableSource], zero_row: bool) -> Rows:
        """This party's rows of the dataset `model` was trained on, as the party's own
        config (`datasets`) names it now.

        Raises:
            JobError: the party no longer exposes that dataset. DataError, ModelError: it
                does not load, or does not fit the model.
        """
        me = model.manifest.party_id
        dataset = resolve_dataset(model.spec, me, datasets)
        if dataset is None:
            raise ModelError(f"model {model.model_id} names no dataset for party '{me}'")
        stamp = file_stamp(dataset.source.path)  # before reading: a change meanwhile shows
        table, inputs, drift = model.read(dataset)
        rows = cls.of(table, inputs, dataset.name, zero_row, drift)
        path = dataset.source.path
        return replace(rows, datasets=datasets, path=path, stamp=stamp, zero_row=zero_row)

    def reloaded(self, model: LoadedModel) -> Rows:
        """These rows, or the dataset's rows read anew if its file changed since: people
        added to a party's table are scored without a restart. A changed file that does
        not load (half written, or no longer fitting the model) leaves these rows, with a
        warning, until it changes again."""
        if self.datasets is None or self.path is None:
            return self
        stamp = file_stamp(self.path)
        if stamp == self.stamp:
            return self
        try:
            rows = Rows.load(model, self.datasets, self.zero_row)
        except PartyError as exc:
            log.warning("model %s: its changed dataset did not load: %s", model.model_id, exc)
            return replace(self, stamp=stamp)
        log.info("model %s: its dataset changed, %d rows", model.model_id, len(rows.index))
        return rows

    def count_drift(self, rows: np.ndarray, sink: DriftSink | None) -> None:
        """Tell `sink` the drift counts of `rows` (positions of held rows), if any."""
        if sink is None or not len(self.drift.per_row):
            return
        counts = self.drift.totals(rows)
        if any(counts.values()):
            sink(counts)

    @classmethod
    def of(
        cls, table: Table, inputs: Inputs, dataset: str, zero_row: bool, drift: Drift | None = None
    ) -> Rows:
        """`inputs`, the model's inputs of `table` (`LoadedModel.read`), by id (with a row of
        zeros after the last one when `zero_row`: a passive party scores it for ids it
        lacks); `drift`: what they drifted from the training rows.

        Raises:
            DataError: duplicate ids.
        """
        index = {str(i): r for r, i in enumerate(table.ids)}
        if len(index) != table.rows:
            raise DataError(
                f"dataset '{dataset}' holds {table.rows - len(index)} duplicate id(s); "
                "deduplicate its id column to score rows by id"
            )
        if zero_row:
            inputs = inputs.with_zero_row()
        return cls(inputs, index, drift=drift or Drift())


class ActiveSession:
    """The active party's side of a session: `score(ids)` runs one micro-batch with every
    passive party. Not thread-safe: one worker calls it, batch after batch."""

    def __init__(
        self,
        session_id: str,
        channel: Channel,
        scorer: Trainer,
        rows: Rows,
        passives: dict[str, str],  # party id -> address
        timeout: float,
        foreground: Foreground = nullcontext,
        count_drift: DriftSink | None = None,
    ) -> None:
        """`foreground`: marks each micro-batch as latency-bound (background work of the
        party, such as filling its kept obfuscator pools, pauses meanwhile); `count_drift`:
        told the drift counts of each micro-batch's rows that drifted."""
        self.session_id, self.channel, self.scorer, self.rows = session_id, channel, scorer, rows
        self.passives, self.timeout, self.foreground = passives, timeout, foreground
        self.count_drift = count_drift
        self.batches = 0

    def score(self, ids: list[str]) -> tuple[np.ndarray, dict[int, list[str]]]:
        """The model's outputs for `ids` (each held here), and for the positions some
        passive party lacks, the parties that lack it (those outputs are meaningless).

        Raises:
            ChannelError, PayloadError: a passive party failed or sent a malformed reply.
        """
        with self.foreground():
            return self._score(ids)

    def _score(self, ids: list[str]) -> tuple[np.ndarray, dict[int, list[str]]]:
        self.batches += 1
        tag = batch_tag(self.batches)
        for peer in self.passives:
            self.channel.send(peer, f"{tag}/ids", ids_to_payload(ids))
        rows = np.array([self.rows.index[i] for i in ids], dtype=np.int64)
        self.rows.count_drift(rows, self.count_drift)
        out = self.scorer.score(tag, self.rows.inputs, rows)
        lacking: dict[int, list[str]] = {}
        for peer in self.passives:
            reply = self.channel.recv(peer, f"{tag}/lacks", self.timeout)
            for pos in indices_from_payload(reply, len(ids)):
                lacking.setdefault(int(pos), []).append(peer)
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
        scorer: Trainer,
        rows: Rows,
        idle_s: float = PASSIVE_IDLE_S,
        foreground: Foreground = nullcontext,
        count_drift: DriftSink | None = None,
    ) -> None:
        """`foreground`: as for `ActiveSession`, around each micro-batch once its ids came.
        A micro-batch with an id this party lacks reads the rows anew if the dataset's
        file changed (`Rows.reloaded`)."""
        self.foreground = foreground
        self.session_id, self.model = session_id, model
        self.channel, self.mailbox, self.scorer, self.rows = channel, mailbox, scorer, rows
        self.active = model.spec.active.id
        self.idle_s, self.count_drift = idle_s, count_drift
        self.batches = 0

    def serve(self) -> None:
        me = self.channel.party_id
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

    def _answer(self, tag: str) -> None:
        """One micro-batch: the ids, which of them this party lacks, the forward."""
        payload = self.channel.recv(self.active, f"{tag}/ids", self.idle_s)
        with self.foreground():
            self._forward(tag, ids_from_payload(payload, MAX_BATCH_IDS))

    def _forward(self, tag: str, ids: list[str]) -> None:
        if any(i not in self.rows.index for i in ids):  # added to the table since?
            self.rows = self.rows.reloaded(self.model)
        zero = self.rows.inputs.rows - 1
        found = [self.rows.index.get(i) for i in ids]
        lacks = np.array([p for p, r in enumerate(found) if r is None], dtype=np.int64)
        rows = np.array([zero if r is None else r for r in found], dtype=np.int64)
        held = np.array([r for r in found if r is not None], dtype=np.int64)
        self.rows.count_drift(held, self.count_drift)
        self.channel.send(self.active, f"{tag}/lacks", indices_to_payload(lacks))
        self.scorer.score(tag, self.rows.inputs, rows)

    def close(self, reason: str) -> None:
        self.mailbox.close(reason)
