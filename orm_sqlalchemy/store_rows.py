"""Rows of the job table as the driver SPI's records (columns in the order ``sql/`` selects)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from jobs.clock import to_datetime
from jobs.driver import JOB_STATES, ClaimedJob, JobInfo, JobState, JobStateCounts
from jobs.payload import decode_payload

__all__ = ["claimed_job", "job_info", "state_counts"]


def claimed_job(row: Sequence[Any]) -> ClaimedJob:
    """A row of the claim's RETURNING list: state, run_at, then the job."""
    return ClaimedJob(
        id=row[2],
        type=row[3],
        payload=row[4],
        attempt=row[5],
        max_attempts=row[6],
        lease_token=row[7],
        timeout_ms=row[8],
        key=row[9],
        trace_context=row[10],
    )


def job_info(row: Sequence[Any]) -> JobInfo:
    job_id, job_type, state, payload, attempts, max_attempts, run_at, error, key, timeout = row
    return JobInfo(
        id=job_id,
        type=job_type,
        state=cast(JobState, state),
        payload=decode_payload(payload),
        attempts=attempts,
        max_attempts=max_attempts,
        run_at=to_datetime(run_at),
        last_error=error,
        key=key,
        timeout_ms=timeout,
    )


def state_counts(rows: Sequence[Sequence[Any]]) -> JobStateCounts:
    counts = dict.fromkeys(JOB_STATES, 0)
    for state, count in rows:
        if state in counts:
            counts[state] = int(count)
    return counts
