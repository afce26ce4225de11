"""An analysis's columns as the result reports them (`vfl.v1.ColumnAnalysis`): counts,
WOE and IV from per-bin counts, bins merged toward a monotone event rate when the job
asks, and a note for a column that cannot inform (one value, no value).

A passive party's column is named `x<j>` (its j-th column analysed) unless that party's
config shares its names (`analysis: {share_names: true}`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from vfl.party.analysis.binning import ColumnBins
from vfl.party.analysis.woe import merged, monotone_starts, woe_iv
from vfl.proto import coordinator_pb2 as pb

ONE_BIN = "one bin holds every row"


def opaque(index: int) -> str:
    """The name a passive party's column goes by when its names are not shared."""
    return f"x{index}"


def own_columns(
    party_id: str, columns: Sequence[ColumnBins], events: np.ndarray, monotone: bool
) -> list[pb.ColumnAnalysis]:
    """The active party's own columns, over its rows' events (0/1, in the rows' order)."""
    out = []
    for col in columns:
        ev, ne = _counts(col, events)
        if monotone and not col.categorical and col.ordered > 1:
            starts = monotone_starts(ev[: col.ordered].tolist(), ne[: col.ordered].tolist())
            col = col.with_starts(starts)
            ev, ne = _counts(col, events)
        entry = described(party_id, col.name, col, bins_known=True)
        out.append(with_counts(entry, ev.tolist(), ne.tolist()))
    return out


def _counts(col: ColumnBins, events: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rows = np.bincount(col.codes, minlength=col.count)
    ev = np.bincount(col.codes, weights=events, minlength=col.count).round().astype(np.int64)
    return ev, rows - ev


def described(party_id: str, name: str, col: ColumnBins, bins_known: bool) -> pb.ColumnAnalysis:
    """A column's entry with its note and, if `bins_known`, its bins: edges or categories,
    whether it is categorical and has empty cells (unknown bins tell none of these, so
    every party's copy of a column agrees on them whichever reaches the result first)."""
    entry = pb.ColumnAnalysis(party=party_id, column=name, note=col.note)
    if bins_known:
        entry.bins_known = True
        entry.categorical, entry.empty = col.categorical, col.empty
        entry.edges.extend(col.edges)
        entry.categories.extend(col.categories)
    return entry


def peer_column(
    party_id: str, name: str, events: Sequence[int], rows: Sequence[int], ordered: int | None
) -> pb.ColumnAnalysis:
    """A passive party's column as the active party knows it: decrypted counts per bin
    (events and rows); with `ordered` (binning: monotone, a numeric column's bins before
    its empty-cell bin) merged toward a monotone event rate, the groups' first bins in
    `merged_from`."""
    ev = [int(v) for v in events]
    ne = [int(r) - int(e) for r, e in zip(rows, events, strict=True)]
    entry = pb.ColumnAnalysis(party=party_id, column=name)
    if ordered is not None and ordered > 1:
        starts = monotone_starts(ev[:ordered], ne[:ordered])
        ev = merged(ev[:ordered], starts) + ev[ordered:]
        ne = merged(ne[:ordered], starts) + ne[ordered:]
        entry.merged_from.extend(starts)
    return with_counts(entry, ev, ne)


def with_counts(
    entry: pb.ColumnAnalysis, events: Sequence[int], non_events: Sequence[int]
) -> pb.ColumnAnalysis:
    """`entry` with its counts, WOE and IV (`party.analysis.woe`)."""
    woe, iv = woe_iv(events, non_events)
    entry.events.extend(int(v) for v in events)
    entry.non_events.extend(int(v) for v in non_events)
    entry.woe.extend(woe)
    entry.iv = iv
    occupied = sum(1 for e, n in zip(events, non_events, strict=True) if e + n > 0)
    if occupied <= 1 and not entry.note:
        entry.note = ONE_BIN
    return entry
