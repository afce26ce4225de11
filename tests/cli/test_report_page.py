"""`vfl report`'s page for a job that reported no round yet, and text that is not HTML."""

from __future__ import annotations

from pathlib import Path

from vfl.cli.report_page import write_report
from vfl.contract.spec import parse_spec_text
from vfl.proto import coordinator_pb2 as pb

from tests.support.jobs import job


def test_a_job_without_rounds_gets_a_page_and_no_png(tmp_path: Path) -> None:
    spec_yaml = job(name="early")
    report = pb.GetJobReportResponse(
        job=pb.JobSummary(
            job_id="early-1",
            name="early",
            state=pb.JOB_STATE_FAILED,
            reason="party 'shop': <b>no dataset</b>",
            created_at=1.0,
        ),
        spec_yaml=spec_yaml,
        spec_json=parse_spec_text(spec_yaml).to_json(),
    )

    written = write_report(report, tmp_path / "out")

    assert written == [tmp_path / "out" / "report.html"]
    page = written[0].read_text()
    assert "FAILED" in page and "no curve yet" in page and "no validation yet" in page
    assert "&lt;b&gt;no dataset&lt;/b&gt;" in page and "<b>no dataset" not in page


def test_an_analysis_gets_a_table_per_party_with_its_bins(tmp_path: Path) -> None:
    # Prepare: an analysis job's result, the shop's column without its bins
    spec_yaml = job(name="woe")
    result = pb.JobResult(analysis=pb.Analysis(rows=10, events=4, non_events=6))
    result.analysis.columns.add(
        party="bank",
        column="age",
        bins_known=True,
        edges=[30.0],
        empty=True,
        iv=0.41,
        events=[1, 2, 1],
        non_events=[4, 1, 1],
        woe=[-1.0, 1.0, 0.4],
    )
    result.analysis.columns.add(
        party="shop", column="x0", iv=0.01, events=[2, 2], non_events=[3, 3], woe=[0, 0]
    )
    report = pb.GetJobReportResponse(
        job=pb.JobSummary(job_id="woe-1", name="woe", state=pb.JOB_STATE_SUCCEEDED),
        result=result,
        spec_yaml=spec_yaml,
        spec_json=parse_spec_text(spec_yaml).to_json(),
    )
    # Execute
    page = write_report(report, tmp_path / "out")[-1].read_text()
    # Assert
    assert "<h3>bank</h3>" in page and "<h3>shop</h3>" in page
    assert "(-inf, 30]: 1/4 woe -1.000" in page and "(empty): 1/1 woe 0.400" in page
    assert "0.4100" in page and "strong" in page and "#1: 2/3" in page and "useless" in page
