"""Rows of the store tables as the SPI's records, read by column name (the names ``sql/``
selects or returns), so a statement may list its columns in any order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from jobs.clock import to_datetime
from jobs.driver import JOB_STATES, ClaimedJob, JobInfo, JobState, JobStateCounts
from jobs.outbox import OutboxEntry
from jobs.payload import decode_payload

__all__ = ["claimed_job", "job_info", "outbox_entry", "state_counts"]

Row = Mapping[str, Any]


def claimed_job(row: Row) -> ClaimedJob:
    """A row of the claim's RETURNING list."""
    return ClaimedJob(
        id=row["id"],
        type=row["type"],
        payload=row["payload"],
        attempt=row["attempts"],
        max_attempts=row["max_attempts"],
        lease_token=row["lease_token"],
        timeout_ms=row["timeout_ms"],
        key=row["key"],
        trace_context=row["trace_context"],
    )


def job_info(row: Row) -> JobInfo:
    return JobInfo(
        id=row["id"],
        type=row["type"],
        state=cast(JobState, row["state"]),
        payload=decode_payload(row["payload"]),
        attempts=row["attempts"],
        max_attempts=row["max_attempts"],
        run_at=to_datetime(row["run_at"]),
        last_error=row["last_error"],
        key=row["key"],
        timeout_ms=row["timeout_ms"],
    )


def state_counts(rows: Sequence[Row]) -> JobStateCounts:
    counts = dict.fromkeys(JOB_STATES, 0)
    for row in rows:
        if row["state"] in counts:
            counts[row["state"]] = int(row["jobs"])
    return counts


def outbox_entry(row: Row) -> OutboxEntry:
    """A row of the outbox claim's RETURNING list."""
    return OutboxEntry(
        id=row["id"],
        type=row["type"],
        payload=decode_payload(row["payload"]),
        key=row["key"],
        delay_ms=row["delay_ms"],
        created_at=to_datetime(row["created_at"]),
        attempts=row["attempts"],
        lease_token=row["lease_token"],
        trace_context=row["trace_context"],
    )
