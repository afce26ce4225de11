"""A job as its readers see it, built from the job store: its summary (`vfl jobs`), its
view (`GetJob`, `WatchJob`) and its report (`GetJobReport`: what `vfl report` and the
dashboard draw).

A report's curves come from the progress reports the store keeps (`JobStore.metrics`):
every party's `RoundDone` (a sample: a party reports at most every half second, and its
last round) with its cumulative bytes sent and local updates, and the active party's
`Validated`. Their times are seconds since the job was submitted, as the coordinator heard
them, so both curves share one clock across resumes.
"""

from __future__ import annotations

from vfl.coordinator.store import JobRecord, JobStore
from vfl.proto import coordinator_pb2 as pb


def summary(record: JobRecord) -> pb.JobSummary:
    return pb.JobSummary(
        job_id=record.job_id,
        name=record.name,
        state=record.state,
        created_at=record.created_at,
        updated_at=record.updated_at,
        reason=record.reason,
    )


def view(record: JobRecord) -> pb.GetJobResponse:
    result = pb.JobResult()
    result.CopyFrom(record.result)
    result.job = record.job_id
    return pb.GetJobResponse(job=summary(record), result=result)


def report(store: JobStore, record: JobRecord) -> pb.GetJobReportResponse:
    """The job of `record` with its spec and its per-round curves, oldest point first."""
    t0 = record.created_at
    rounds = [
        pb.RoundPoint(
            party_id=r["party"],
            round=int(r.get("round", 0)),
            seconds=round(r["ts"] - t0, 3),
            loss=r.get("loss"),
            bytes_sent=int(r.get("bytes_sent", 0)),
            local_updates=int(r.get("local_updates", 0)),
        )
        for r in store.metrics(record.job_id, "round")
    ]
    validations = [
        pb.ValidationPoint(
            round=int(v.get("round", 0)),
            seconds=round(v["ts"] - t0, 3),
            metrics=v.get("metrics", {}),
        )
        for v in store.metrics(record.job_id, "validation")
    ]
    current = view(record)
    return pb.GetJobReportResponse(
        job=current.job,
        result=current.result,
        spec_yaml=record.spec_yaml,
        spec_json=record.spec_json,
        rounds=rounds,
        validations=validations,
    )
