"""An analysis job's result for the Python API and `vfl analyze --json`: per column its
party, name (or opaque name), bins, counts, WOE and IV (`Client.analyze`; docs/usage.md,
"Analysis: WOE and IV").

Bins of a numeric column are right-closed, cut at `edges` (the first from -inf, the last
to +inf); a categorical column's bins are its `categories` and then one bin of every
other word; when `empty`, an empty-cell bin comes last. `edges` and `categories` are
None where the column's party did not report its bins (a passive party's, unless its
config says `report_bins: true`); `iv` is None where no one reported the counts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from vfl.proto import coordinator_pb2 as pb


@dataclass(frozen=True)
class ColumnIV:
    """One column's WOE bins and information value."""

    party: str
    column: str
    edges: tuple[float, ...] | None
    categories: tuple[str, ...] | None
    empty: bool
    events: tuple[int, ...]
    non_events: tuple[int, ...]
    woe: tuple[float, ...]
    iv: float | None
    note: str
    selected: bool | None

    @staticmethod
    def from_proto(c: pb.ColumnAnalysis) -> ColumnIV:
        known = c.bins_known
        return ColumnIV(
            party=c.party,
            column=c.column,
            edges=tuple(c.edges) if known and not c.categorical else None,
            categories=tuple(c.categories) if known and c.categorical else None,
            empty=c.empty,
            events=tuple(int(v) for v in c.events),
            non_events=tuple(int(v) for v in c.non_events),
            woe=tuple(c.woe),
            iv=c.iv if c.HasField("iv") else None,
            note=c.note,
            selected=c.selected if c.HasField("selected") else None,
        )


@dataclass(frozen=True)
class Analysis:
    """Every party's columns over the `rows` aligned rows (`events` of them label 1)."""

    rows: int
    events: int
    non_events: int
    columns: tuple[ColumnIV, ...]

    @staticmethod
    def from_proto(a: pb.Analysis) -> Analysis:
        columns = tuple(ColumnIV.from_proto(c) for c in a.columns)
        return Analysis(int(a.rows), int(a.events), int(a.non_events), columns)

    def to_plain(self) -> dict[str, Any]:
        """As `vfl analyze --json` prints it (with the job's id and state beside)."""
        out = asdict(self)
        for column in out["columns"]:
            for key in ("edges", "categories", "events", "non_events", "woe"):
                if column[key] is not None:
                    column[key] = list(column[key])
        return out

    def party(self, party_id: str) -> tuple[ColumnIV, ...]:
        """The columns of one party, in its order."""
        return tuple(c for c in self.columns if c.party == party_id)
