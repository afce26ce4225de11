"""An analysis job's result: the parties' reports folded into one list of columns,
whichever arrives first; a passive party's quantile edges cut where the active party
merged its bins (binning: monotone)."""

from __future__ import annotations

import numpy as np
import pytest
from vfl.contract.spec import JobSpec
from vfl.coordinator.analysis import merge_analysis
from vfl.party.analysis.binning import ColumnBins
from vfl.party.analysis.result import described, peer_column
from vfl.proto import coordinator_pb2 as pb

SPEC = JobSpec.model_validate(
    {
        "parties": [
            {"id": "bank", "role": "active", "data": {"dataset": "d"}},
            {"id": "shop", "role": "passive", "data": {"dataset": "d"}},
        ]
    }
)


def _reports() -> dict[str, pb.Analysis]:
    bank = pb.Analysis(rows=10, events=4, non_events=6)
    bank.columns.add(
        party="bank",
        column="age",
        bins_known=True,
        edges=[30.0],
        iv=0.3,
        events=[1, 3],
        non_events=[4, 2],
        woe=[-1.0, 1.0],
    )
    bank.columns.add(
        party="shop",
        column="x0",
        iv=0.2,
        events=[1, 3],
        non_events=[5, 1],
        woe=[-1.2, 1.4],
        merged_from=[0, 2],
    )
    shop = pb.Analysis(rows=10)
    shop.columns.add(party="shop", column="x0", bins_known=True, edges=[1.0, 2.0, 3.0], note="")
    return {"bank": bank, "shop": shop}


@pytest.mark.parametrize("order", [("bank", "shop"), ("shop", "bank")])
def test_reports_meet_by_party_and_column_in_any_order(order) -> None:
    # Execute
    result = pb.JobResult()
    reports = _reports()
    for party in order:
        merge_analysis(result, SPEC, party, reports[party])
    # Assert: bank's columns first; the shop's counts from the bank, its edges its own,
    # cut at the merged bins' bounds (bins 0-1 and 2-3 of its four: one edge, 2.0)
    a = result.analysis
    assert (a.rows, a.events, a.non_events) == (10, 4, 6)
    assert [(c.party, c.column) for c in a.columns] == [("bank", "age"), ("shop", "x0")]
    shop = a.columns[1]
    assert shop.bins_known and list(shop.edges) == [2.0]
    assert list(shop.events) == [1, 3] and shop.iv == pytest.approx(0.2)


@pytest.mark.parametrize("order", [("bank", "shop"), ("shop", "bank")])
def test_a_passive_column_whose_bins_are_not_reported_reads_alike_in_any_order(order) -> None:
    # Prepare: the shop's word column with empty cells, its bins not reported
    # (report_bins: false); the bank's copy of it, from the counts it decrypted
    words = ColumnBins("x0", True, (), ("a", "b"), True, np.array([0, 1, 2, 3]), "")
    shop = pb.Analysis(rows=4)
    shop.columns.append(described("shop", "x0", words, bins_known=False))
    bank = pb.Analysis(rows=4, events=2, non_events=2)
    bank.columns.append(peer_column("shop", "x0", [1, 0, 1, 0], [1, 1, 1, 1], None))
    reports = {"bank": bank, "shop": shop}
    # Execute
    result = pb.JobResult()
    for party in order:
        merge_analysis(result, SPEC, party, reports[party])
    # Assert: neither its kind nor its empty cells are told, whoever reported first
    (column,) = result.analysis.columns
    assert (column.bins_known, column.categorical, column.empty) == (False, False, False)
    assert list(column.events) == [1, 0, 1, 0]
