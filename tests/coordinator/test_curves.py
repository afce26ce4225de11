"""A job's curves from its report: loss, validation, and per-round rates from the
cumulative counters parties report."""

from __future__ import annotations

from vfl.contract.curves import curves
from vfl.proto import coordinator_pb2 as pb


def point(party: str, rnd: int, sent: int, updates: int = 0, loss: float | None = None):
    return pb.RoundPoint(
        party_id=party,
        round=rnd,
        seconds=rnd / 10,
        bytes_sent=sent,
        local_updates=updates,
        loss=loss,
    )


def test_rates_are_per_round_between_reports_and_skip_each_runs_first():
    # Prepare: bank reports at rounds 5, 10, 20 (the first includes PSI's bytes), then
    # the job resumes after round 10 with new counters
    report = pb.GetJobReportResponse(
        rounds=[
            point("bank", 5, 9_000, 0, 0.7),
            point("shop", 5, 4_000),
            point("bank", 10, 10_000, 0, 0.6),
            point("shop", 10, 6_000),
            point("bank", 20, 12_000, 0, 0.5),
            point("bank", 15, 500, 0, 0.55),  # resumed: counters start again
            point("bank", 20, 1_500, 0, 0.5),
        ]
    )

    # Execute
    c = curves(report)

    # Assert
    assert [s.values for s in c.loss] == [[0.7, 0.6, 0.5, 0.55, 0.5]]
    bank, shop = c.bytes_per_round
    assert (bank.label, bank.rounds, bank.values) == ("bank", [10, 20, 20], [200, 200, 200])
    assert (shop.label, shop.rounds, shop.values) == ("shop", [10], [400])
    assert c.local_updates_per_round == []  # none: no chart


def test_validation_has_one_series_per_metric_and_local_updates_show_when_counted():
    report = pb.GetJobReportResponse(
        rounds=[point("bank", 2, 10, 4), point("bank", 4, 20, 12)],
        validations=[
            pb.ValidationPoint(round=2, seconds=1.0, metrics={"auc": 0.8, "accuracy": 0.7}),
            pb.ValidationPoint(round=4, seconds=2.0, metrics={"auc": 0.9, "accuracy": 0.75}),
        ],
    )

    c = curves(report)

    assert [(s.label, s.values) for s in c.validation] == [
        ("accuracy", [0.7, 0.75]),
        ("auc", [0.8, 0.9]),
    ]
    assert [s.values for s in c.local_updates_per_round] == [[4.0]]
    assert c.loss == []
    assert c.to_plain()["validation"][1]["seconds"] == [1.0, 2.0]
