"""The in-process driver's job record and its JobInfo view."""

from __future__ import annotations

from dataclasses import dataclass

from .clock import to_datetime
from .payload import decode_payload
from .spi.records import (
    DEFAULT_MAX_STALLS,
    MAX_ERRORS_KEPT,
    FailedAttempt,
    JobInfo,
    JobProgress,
    JobState,
)


@dataclass(slots=True)
class JobRecord:
    id: str
    type: str
    payload: str
    max_attempts: int
    run_at: int
    timeout_ms: int | None
    key: str | None
    trace_context: str | None
    keep_until: int | None
    created_at: int
    max_stalls: int = DEFAULT_MAX_STALLS
    priority: int = 0
    queue: str = "default"
    state: JobState = "pending"
    attempts: int = 0
    stalls: int = 0
    seq: int = 0
    token: str | None = None
    lease_until: int = 0
    expires_at: int = 0
    finished_at: int | None = None
    errors: tuple[tuple[int, int, str], ...] = ()  # (attempt, at, error); no list per job
    result: str | None = None  # the handler's return value, JSON text
    progress: str | None = None  # the last progress reported, JobProgress.text()
    workflow_id: str | None = None
    depends_on: tuple[str, ...] = ()
    continue_after: tuple[str, ...] = ()
    waiting: int = 0  # parents still to finish before the job is due (jobs.spi.WorkflowStore)

    def add_error(self, at: int, error: str) -> None:
        self.errors = (*self.errors, (self.attempts, at, error))[-MAX_ERRORS_KEPT:]


def job_info(record: JobRecord) -> JobInfo:
    errors = tuple(
        FailedAttempt(attempt=attempt, at=to_datetime(at), error=error)
        for attempt, at, error in record.errors
    )
    return JobInfo(
        id=record.id,
        type=record.type,
        state=record.state,
        payload=decode_payload(record.payload),
        attempts=record.attempts,
        max_attempts=record.max_attempts,
        run_at=to_datetime(record.run_at),
        last_error=errors[-1].error if errors else None,
        key=record.key,
        timeout_ms=record.timeout_ms,
        created_at=to_datetime(record.created_at),
        finished_at=to_datetime(record.finished_at) if record.finished_at is not None else None,
        errors=errors,
        trace_context=record.trace_context,
        stalls=record.stalls,
        max_stalls=record.max_stalls,
        priority=record.priority,
        queue=record.queue,
        result=None if record.result is None else decode_payload(record.result),
        progress=JobProgress.of_text(record.progress),
        workflow_id=record.workflow_id,
        depends_on=record.depends_on,
    )
