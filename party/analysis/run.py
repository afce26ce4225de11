"""One party's analysis of its aligned rows: its columns binned, the exchange, what it
reports, and (with `features.select`) the columns it keeps.

The same steps serve `vfl analyze` (an analysis job, `party.analysis.job`) and a training
job with `features.select` (`party.job.PartyJob`, on its training rows, before its
preprocessing is fitted).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
from vfl.contract.spec import JobSpec
from vfl.party.analysis.binning import column_bins
from vfl.party.analysis.protocol import (
    EarlyKeys,
    active_end,
    active_exchange,
    passive_exchange,
)
from vfl.party.analysis.result import described, opaque, own_columns, with_counts
from vfl.party.analysis.sharing import AnalysisSharing
from vfl.party.analysis.woe import WoeError, select
from vfl.party.errors import JobError
from vfl.party.tables.preprocess.fitted import Ignored
from vfl.party.tables.preprocess.preprocessor import Preprocessor
from vfl.party.tables.table import RawTable
from vfl.proto import coordinator_pb2 as pb
from vfl.secure.channel import Channel
from vfl.secure.executor import BlockExecutor

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Analysed:
    """What one party's analysis ends with: what it reports, and the names of its own
    columns it keeps (None: the job selects none)."""

    report: pb.Analysis
    keep: set[str] | None


def analyse(
    channel: Channel,
    spec: JobSpec,
    raw: RawTable,
    rows: np.ndarray,
    executor: BlockExecutor | None,
    sharing: AnalysisSharing,
    training: bool,
    early: EarlyKeys | None = None,
) -> Analysed:
    """This party's analysis over `raw`'s rows `rows` (positions, in the aligned order).
    `training`: a training job's selection (the passive parties are told what to keep);
    `early`: the active party's key pair, begun before PSI (`early_keys`).

    Raises:
        DataError: a LIBSVM table; no event or no non-event among the rows.
        JobError: a peer's malformed message.
    """
    me = channel.party_id
    columns = column_bins(raw, rows, spec.features.bins, me)
    monotone = spec.features.binning == "monotone"
    if spec.party(me).role == "active":
        job = (spec, raw, rows, columns, executor, sharing, training, monotone, early)
        return _active(channel, *job)
    names = [c.name for c in columns] if sharing.share_names else None
    end = passive_exchange(channel, spec, columns, names, executor, monotone)
    report = pb.Analysis(rows=len(rows))
    for j, col in enumerate(columns):
        if end.merged_from and len(end.merged_from[j]) > 0:
            col = col.with_starts(end.merged_from[j])
        name = col.name if names is not None else opaque(j)
        entry = described(me, name, col, bins_known=sharing.report_bins)
        if end.events is not None and end.non_events is not None:
            with_counts(entry, end.events[j], end.non_events[j])
        if end.keep is not None:
            entry.selected = j in end.keep
        report.columns.append(entry)
    keep = None if end.keep is None else {columns[j].name for j in end.keep}
    return Analysed(report, keep)


def selection(
    channel: Channel,
    spec: JobSpec,
    raw: RawTable,
    rows: np.ndarray,
    executor: BlockExecutor | None,
    sharing: AnalysisSharing,
    early: EarlyKeys | None = None,
) -> dict[str, Any]:
    """A training job's `features.select` at this party: every party's analysis of the
    training rows `rows`, then this party's own columns kept and dropped (by name) and
    the IVs it knows of them: what its model part keeps as `selection`."""
    analysed = analyse(channel, spec, raw, rows, executor, sharing, True, early)
    keep = analysed.keep or set()
    own = [c for c in analysed.report.columns if c.party == channel.party_id]
    mine = [c.name for c in raw.columns if not c.ignored]  # as analysed, in order
    ivs = {n: c.iv for n, c in zip(mine, own, strict=True) if c.HasField("iv")}
    log.info(
        "party %s: features.select keeps %d of its %d columns",
        channel.party_id,
        len(keep),
        len(mine),
    )
    return {
        "kept": [n for n in mine if n in keep],
        "dropped": [n for n in mine if n not in keep],
        "iv": ivs,
    }


def early_keys(spec: JobSpec, party_id: str) -> EarlyKeys | None:
    """At the active party of a job that analyses (an analysis job, or features.select),
    its key pair begun now, in the background (`EarlyKeys`); else None."""
    analyses = spec.analyze or spec.features.select is not None
    return EarlyKeys(party_id, spec) if analyses and spec.party(party_id).role == "active" else None


def without_dropped(fitted: Preprocessor, chosen: dict[str, Any] | None) -> Preprocessor:
    """`fitted` with the columns `selection` dropped left out (`ignore`), so that the
    model part applies the choice wherever it scores."""
    if chosen is None:
        return fitted
    dropped = set(chosen["dropped"])
    columns = tuple(Ignored(name=c.name) if c.name in dropped else c for c in fitted.columns)
    return fitted.model_copy(update={"columns": columns})


def _active(
    channel: Channel,
    spec: JobSpec,
    raw: RawTable,
    rows: np.ndarray,
    columns: list,
    executor: BlockExecutor | None,
    sharing: AnalysisSharing,
    training: bool,
    monotone: bool,
    early: EarlyKeys | None,
) -> Analysed:
    if raw.labels is None:
        raise JobError(f"party '{channel.party_id}' holds no labels to analyse against")
    events = _events(raw.labels[rows])
    own = own_columns(channel.party_id, columns, events, monotone)
    peers = active_exchange(channel, spec, events, executor, early)
    chosen = spec.features.select
    keep: set[str] | None = None
    if chosen is not None:
        keep = select({c.column: c.iv for c in own}, chosen.iv_min, chosen.top)
        for entry in own:
            entry.selected = entry.column in keep
    for peer, analysis in peers.items():
        positions = None
        if chosen is not None:
            kept = select({c.column: c.iv for c in analysis.columns}, chosen.iv_min, chosen.top)
            positions = [j for j, c in enumerate(analysis.columns) if c.column in kept]
            for entry in analysis.columns:
                entry.selected = entry.column in kept
        shown = analysis if sharing.show_passive else None
        active_end(channel, peer, positions if training else None, shown)
    report = pb.Analysis(rows=len(rows), events=int(events.sum()))
    report.non_events = report.rows - report.events
    report.columns.extend(own)
    for analysis in peers.values():
        report.columns.extend(analysis.columns)
    return Analysed(report, keep)


def _events(labels: np.ndarray) -> np.ndarray:
    """1.0 where a binary label takes its larger value (the event), else 0.0.

    Raises:
        WoeError: the rows hold one class only (or more than two).
    """
    classes = np.unique(labels)
    if len(classes) != 2:
        raise WoeError(
            f"the aligned rows' label has {len(classes)} distinct value(s); WOE and IV need "
            "a binary label with both classes among the common rows",
        )
    return (labels == classes[1]).astype(np.float64)
