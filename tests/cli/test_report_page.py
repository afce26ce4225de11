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
