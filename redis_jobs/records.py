"""Job records as the scripts return them (HGETALL field/value pairs), read into ``JobInfo``."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from jobs.spi import DEFAULT_MAX_STALLS, JOB_STATES, FailedAttempt, JobInfo, JobProgress, JobState
from jobs.spi.support import DEFAULT_QUEUE, decode_payload, to_datetime

from .errors import RedisScriptError


def fields_of(reply: Sequence[Any], text: Callable[[Any], str]) -> dict[str, str]:
    """A flat field/value reply as a dict of text."""
    return {text(reply[i]): text(reply[i + 1]) for i in range(0, len(reply), 2)}


def job_info(job_id: str, record: dict[str, str]) -> JobInfo:
    """The JobInfo of a record; RedisScriptError naming the job if a field is malformed."""
    try:
        return JobInfo(
            id=job_id,
            type=record["type"],
            state=state_of(record["state"]),
            payload=decode_payload(record["payload"]),
            attempts=int(record["attempts"]),
            max_attempts=int(record["max_attempts"]),
            run_at=to_datetime(int(record["run_at"])),
            last_error=record.get("last_error"),
            key=record.get("key"),
            trace_context=record.get("trace_context"),
            timeout_ms=int(record["timeout_ms"]) if "timeout_ms" in record else None,
            created_at=to_datetime(int(record.get("created_at", record["run_at"]))),
            finished_at=(
                to_datetime(int(record["finished_at"])) if "finished_at" in record else None
            ),
            errors=tuple(
                FailedAttempt(attempt=int(attempt), at=to_datetime(int(at)), error=str(error))
                for attempt, at, error in json.loads(record.get("errors") or "[]")
            ),
            stalls=int(record.get("stalls", 0)),
            max_stalls=int(record.get("max_stalls", DEFAULT_MAX_STALLS)),
            priority=int(record.get("priority", 0)),
            queue=record.get("queue") or DEFAULT_QUEUE,
            result=decode_payload(record["result"]) if "result" in record else None,
            progress=JobProgress.of_text(record.get("progress")),
            workflow_id=record.get("workflow"),
            depends_on=parents_of(record.get("depends_on")),
        )
    except (KeyError, ValueError, TypeError) as exc:
        raise RedisScriptError(f"job record of {job_id!r} is malformed: {exc!r}") from exc


def parents_of(depends_on: str | bool | None) -> tuple[str, ...]:
    """A workflow job's parents from its ``depends_on`` field (JSON ids; absent: none)."""
    if not isinstance(depends_on, str):
        return ()
    parents = json.loads(depends_on)
    if not isinstance(parents, list) or not all(isinstance(parent, str) for parent in parents):
        raise ValueError(f"depends_on is not a list of job ids: {depends_on!r}")
    return tuple(parents)


def state_of(text: str) -> JobState:
    for state in JOB_STATES:
        if state == text:
            return state
    raise ValueError(f"unknown job state {text!r}")
