"""Rows of the store tables as the SPI's records, read by column name (the names ``sql/``
selects or returns), so a statement may list its columns in any order; and a batch of job
requests as the parameters of one statement."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

from jobs.spi import (
    JOB_STATES,
    ClaimedJob,
    FailedAttempt,
    JobInfo,
    JobProgress,
    JobRequest,
    JobState,
    JobStateCounts,
    OutboxEntry,
    OutboxEntryInfo,
    OverdueEntry,
    PublishedEntry,
    RelayInfo,
    WorkerInfo,
)
from jobs.spi.support import decode_payload, to_datetime

__all__ = [
    "batch_params",
    "claimed_job",
    "malformed",
    "failed_attempts",
    "first_of_each_key",
    "job_info",
    "outbox_entry",
    "state_counts",
    "worker_info",
]

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
        reclaimed=bool(row["reclaimed"]),
        run_at_ms=row["run_at"],
        stalls=row["stalls"],
        depends_on=_depends_on(row["depends_on"]),
    )


def _depends_on(depends_on: str | None) -> tuple[str, ...]:
    """The ``depends_on`` column (a JSON array of job ids; NULL for a job of no workflow)."""
    return tuple(json.loads(depends_on)) if depends_on else ()


_CLAIMED_NUMBERS = (("attempts", 1), ("max_attempts", 1), ("run_at", 0), ("stalls", 0))


def malformed(row: Row) -> str | None:
    """What is wrong with a claimed row that a worker cannot run (a value planted behind the
    queue's back: SQLite keeps text in an INTEGER column), or None when it is fine."""
    for name, low in _CLAIMED_NUMBERS:
        value = row[name]
        if type(value) is not int or value < low:
            return f"{name} is {value!r}, not a whole number from {low}"
    timeout = row["timeout_ms"]
    if timeout is not None and (type(timeout) is not int or timeout < 1):
        return f"timeout_ms is {timeout!r}, not a whole number from 1"
    if type(row["payload"]) is not str:
        return f"payload is {row['payload']!r}, not JSON text"
    return None


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
        created_at=to_datetime(row["created_at"]),
        finished_at=None if row["finished_at"] is None else to_datetime(row["finished_at"]),
        trace_context=row["trace_context"],
        errors=failed_attempts(row["errors"]),
        stalls=row["stalls"],
        max_stalls=row["max_stalls"],
        priority=row["priority"],
        queue=row["queue"],
        result=None if row["result"] is None else decode_payload(row["result"]),
        progress=JobProgress.of_text(row["progress"]),
        workflow_id=row["workflow_id"],
        depends_on=_depends_on(row["depends_on"]),
    )


def failed_attempts(errors: str | None) -> tuple[FailedAttempt, ...]:
    """The ``errors`` column (JSON ``[[attempt, at_ms, error], ...]``) as FailedAttempts."""
    if not errors:
        return ()
    return tuple(
        FailedAttempt(attempt=int(attempt), at=to_datetime(int(at)), error=error)
        for attempt, at, error in json.loads(errors)
    )


def worker_info(row: Row) -> WorkerInfo:
    """A row of the workers table (``types`` is a JSON array)."""
    return WorkerInfo(
        id=row["id"],
        host=row["host"],
        pid=row["pid"],
        types=tuple(json.loads(row["types"])),
        concurrency=row["concurrency"],
        in_flight=row["in_flight"],
        started_at=to_datetime(row["started_at"]),
        last_seen=to_datetime(row["last_seen"]),
        queues=tuple(json.loads(row["queues"])) if row["queues"] else (),
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
        run_at_ms=row["run_at"],
        max_attempts=row["max_attempts"],
        priority=row["priority"],
        queue=row["queue"],
    )


def outbox_entry_info(row: Row) -> OutboxEntryInfo:
    """A row of the outbox's ``list_entries``/``get_entry`` (``now``: the store's clock)."""
    published = row["published_at"]
    return OutboxEntryInfo(
        id=row["id"],
        type=row["type"],
        payload=decode_payload(row["payload"]),
        key=row["key"],
        created_at=to_datetime(row["created_at"]),
        available_at=to_datetime(row["available_at"]),
        published_at=None if published is None else to_datetime(published),
        attempts=row["attempts"],
        last_error=row["last_error"],
        leased=(
            published is None
            and row["lease_token"] is not None
            and int(row["available_at"]) > int(row["now"])
        ),
        run_at_ms=row["run_at"],
        max_attempts=row["max_attempts"],
    )


def relay_info(row: Row) -> RelayInfo:
    """A row of the outbox's relays table."""
    return RelayInfo(
        id=row["id"],
        host=row["host"],
        pid=row["pid"],
        started_at=to_datetime(row["started_at"]),
        last_seen=to_datetime(row["last_seen"]),
    )


def first_of_each_key(jobs: Sequence[JobRequest]) -> list[JobRequest]:
    """The batch without later repeats of a key (the first of a key wins, as one by one)."""
    seen: set[str] = set()
    kept = []
    for job in jobs:
        if job.key is not None:
            if job.key in seen:
                continue
            seen.add(job.key)
        kept.append(job)
    return kept


def batch_params(jobs: Sequence[JobRequest], *, postgres: bool) -> dict[str, Any]:
    """``enqueue_many``'s parameters: one array per column (PostgreSQL), or one JSON array of
    rows (SQLite, read with ``json_each``)."""
    columns = [
        (job.id, job.type, job.payload, job.max_attempts, job.run_at_ms, job.delay_ms,
         job.timeout_ms, job.key, job.trace_context, job.keep_until_ms, job.max_stalls,
         job.priority, job.queue)
        for job in jobs
    ]  # fmt: skip
    if not postgres:
        return {"jobs": json.dumps(columns)}
    names = ("ids", "types", "payloads", "max_attempts", "run_ats", "delays", "timeouts", "keys",
             "trace_contexts", "keep_untils", "max_stalls", "priorities", "queues")  # fmt: skip
    arrays = zip(*columns, strict=True)
    return {name: list(values) for name, values in zip(names, arrays, strict=True)}


def overdue_entry(row: Row) -> OverdueEntry:
    """A row of the auditor's ``audit_overdue``."""
    return OverdueEntry(
        id=row["id"],
        type=row["type"],
        key=row["key"],
        created_at=to_datetime(row["created_at"]),
        age_ms=max(int(row["age_ms"]), 0),
        attempts=row["attempts"],
        last_error=row["last_error"],
        leased=bool(row["leased"]),
    )


def published_entry(row: Row) -> PublishedEntry:
    """A row of the auditor's ``audit_published``."""
    return PublishedEntry(
        id=row["id"],
        type=row["type"],
        key=row["key"],
        created_at=to_datetime(row["created_at"]),
        published_at_ms=int(row["published_at"]),
    )
