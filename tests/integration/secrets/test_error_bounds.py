"""A handler's huge exception message gives a bounded log line, span and stored error, and a
URL in it shows no password (a real SQLite store and the SDK's in-memory span exporter)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from jobs import JobHandlerRegistry, JobQueue, JobRunner
from jobs.telemetry import MAX_ERROR_CHARS
from orm_sqlalchemy import SQLAlchemyJobStore
from tests.support import captured_logs, wait_until

HUGE = 5_000_000
LOG_HEADLINE_ROOM = 400
"""What a log line holds besides the error: the job's type, id and attempt."""


async def run_failing(tmp_path: Path, message: str) -> tuple[Any, list[dict[str, Any]]]:
    store = SQLAlchemyJobStore(f"sqlite+aiosqlite:///{tmp_path / 'jobs.db'}")
    registry = JobHandlerRegistry()

    async def broken(payload: Any) -> None:
        raise RuntimeError(message)

    registry.register("report.build", broken, max_attempts=2, backoff=lambda attempt: 0)
    queue = JobQueue(store)
    job_id = await queue.enqueue("report.build", {})
    assert job_id is not None
    runner = JobRunner(store, registry)
    with captured_logs("WARNING") as logs:
        runner.start()

        async def failed() -> bool:
            info = await store.get_job(job_id)
            return info is not None and info.state == "failed"

        await wait_until(failed, timeout=30)
        await runner.close()
    info = await store.get_job(job_id)
    await store.close()
    return info, [log for log in logs if log["extra"].get("job_id") == job_id]


def job_spans(exporter: InMemorySpanExporter) -> list[Any]:
    return [span for span in exporter.get_finished_spans() if span.name.startswith("jobs.job.")]


def span_size(span: Any) -> int:
    """The span's texts as an exporter would carry them (attributes, events, status)."""
    return len(span.to_json())


async def test_a_5mb_exception_message_gives_bounded_logs_spans_and_errors(
    tmp_path: Path, span_exporter: InMemorySpanExporter
) -> None:
    info, logs = await run_failing(tmp_path, "x" * HUGE)

    assert [log["level"] for log in logs] == ["WARNING", "ERROR"]  # a retry, then for good
    for log in logs:
        assert "RuntimeError: xxx" in log["message"]
        assert len(log["message"]) <= MAX_ERROR_CHARS + LOG_HEADLINE_ROOM
        assert "characters cut" in log["message"]
    spans = job_spans(span_exporter)
    assert len(spans) == 2
    for span in spans:
        assert span.status.description.startswith("RuntimeError: xxx")
        assert len(span.status.description) <= MAX_ERROR_CHARS
        (event,) = span.events
        assert event.name == "exception"
        assert event.attributes["exception.type"] == "RuntimeError"
        for name in ("exception.message", "exception.stacktrace"):
            assert len(event.attributes[name]) <= MAX_ERROR_CHARS
        assert "Traceback (most recent call last)" in event.attributes["exception.stacktrace"]
        assert span_size(span) < 4 * MAX_ERROR_CHARS + 4_000
    assert info.last_error.startswith("RuntimeError: xxx")
    assert len(info.last_error) <= MAX_ERROR_CHARS
    assert all(len(attempt.error) <= MAX_ERROR_CHARS for attempt in info.errors)


async def test_a_url_in_an_error_shows_no_password_in_logs_spans_or_the_store(
    tmp_path: Path, span_exporter: InMemorySpanExporter
) -> None:
    message = "cannot reach postgresql://app:hunter2@db:5432/app?sslpassword=swordfish (refused)"
    info, logs = await run_failing(tmp_path, message)

    shown = [log["message"] for log in logs]
    for span in job_spans(span_exporter):
        shown.append(span.status.description)
        shown.append(json.dumps(dict(span.events[0].attributes)))
    shown.append(info.last_error)
    shown.extend(attempt.error for attempt in info.errors)
    assert len(shown) == 2 + 2 * 2 + 1 + 2
    for text in shown:
        assert "hunter2" not in text
        assert "swordfish" not in text
        assert "postgresql://app:***@db:5432/app?sslpassword=***" in text
