"""An analysis job's result: every party's `done` report folded into one list of columns.

The active party reports its own columns whole and each passive party's columns as it
knows them (counts, WOE, IV; under binning: monotone, `merged_from`); a passive party
reports its own columns' bins when its config says so (`report_bins`), and their counts
when the active party's config shows them to it. Entries meet by (party, column); the
columns are listed party by party in the spec's order.
"""

from __future__ import annotations

from vfl.contract.spec import JobSpec
from vfl.proto import coordinator_pb2 as pb


def merge_analysis(result: pb.JobResult, spec: JobSpec, party_id: str, report: pb.Analysis) -> None:
    """Fold `party_id`'s analysis report into `result.analysis`."""
    analysis = result.analysis
    if party_id == spec.active.id:
        analysis.rows, analysis.events = report.rows, report.events
        analysis.non_events = report.non_events
    elif not analysis.rows:
        analysis.rows = report.rows
    held = {(c.party, c.column): c for c in analysis.columns}
    for entry in report.columns:
        known = held.get((entry.party, entry.column))
        if known is None:
            analysis.columns.append(entry)
            held[(entry.party, entry.column)] = analysis.columns[-1]
        else:
            _merge(known, entry, owner=entry.party == party_id)
    for column in analysis.columns:
        _cut(column)
    order = {p.id: i for i, p in enumerate(spec.parties)}
    columns = sorted(analysis.columns, key=lambda c: order.get(c.party, len(order)))
    copies = [pb.ColumnAnalysis() for _ in columns]
    for copy, column in zip(copies, columns, strict=True):
        copy.CopyFrom(column)
    del analysis.columns[:]
    analysis.columns.extend(copies)


def _merge(known: pb.ColumnAnalysis, entry: pb.ColumnAnalysis, owner: bool) -> None:
    """`entry`'s fields that `known` lacks: the bins from their owner, the counts from
    the active party; the owner's note wins."""
    if entry.bins_known and not known.bins_known:
        known.bins_known, known.categorical, known.empty = True, entry.categorical, entry.empty
        known.edges[:] = entry.edges
        known.categories[:] = entry.categories
    if entry.HasField("iv") and not known.HasField("iv"):
        known.iv = entry.iv
        known.events[:] = entry.events
        known.non_events[:] = entry.non_events
        known.woe[:] = entry.woe
        known.merged_from[:] = entry.merged_from
    if entry.merged_from and not known.merged_from:
        known.merged_from[:] = entry.merged_from
    if entry.note and (owner or not known.note):
        known.note = entry.note
    if entry.HasField("selected") and not known.HasField("selected"):
        known.selected = entry.selected


def _cut(column: pb.ColumnAnalysis) -> None:
    """A numeric column whose counts were merged (binning: monotone) at the active party
    and whose quantile edges its owner reported: the edges at the merged bins' bounds."""
    starts = list(column.merged_from)
    if not starts or not column.bins_known or column.categorical:
        return
    if len(column.edges) == len(starts) - 1:
        return  # cut already (or its owner merged them itself)
    edges = list(column.edges)
    if starts[-1] > len(edges):
        return  # not the bins these starts were made on: leave them as reported
    column.edges[:] = [edges[s - 1] for s in starts[1:]]
