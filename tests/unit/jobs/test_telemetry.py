from __future__ import annotations

from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from jobs import InProcessJobDriver, JobHandlerRegistry, JobQueue, JobRunner
from jobs.telemetry import current_traceparent, parse_traceparent
from tests.support import wait_until


async def run_jobs(
    handler: Any, enqueue_count: int = 1, *, max_attempts: int = 1, in_request: bool = False
) -> tuple[InProcessJobDriver, list[str]]:
    driver = InProcessJobDriver()
    registry = JobHandlerRegistry()
    registry.register("report.build", handler, max_attempts=max_attempts)
    queue = JobQueue(driver)
    ids: list[str] = []
    for _ in range(enqueue_count):
        if in_request:
            with trace.get_tracer("test").start_as_current_span("POST /reports"):
                job_id = await queue.enqueue("report.build", {"month": "2026-10"})
        else:
            job_id = await queue.enqueue("report.build", {"month": "2026-10"})
        assert job_id is not None
        ids.append(job_id)
    runner = JobRunner(driver, registry)
    runner.start()
    for job_id in ids:
        await wait_until(lambda j=job_id: _finished(driver, j))
    await runner.close()
    return driver, ids


async def _finished(driver: InProcessJobDriver, job_id: str) -> bool:
    info = await driver.get_job(job_id)
    return info is not None and info.state in ("completed", "failed")


def job_spans(exporter: InMemorySpanExporter) -> list[Any]:
    return [span for span in exporter.get_finished_spans() if span.name.startswith("jobs.job.")]


async def test_one_internal_span_per_execution_with_its_attributes(
    span_exporter: InMemorySpanExporter,
) -> None:
    async def works(payload: Any) -> None: ...

    _, (job_id,) = await run_jobs(works)
    (span,) = job_spans(span_exporter)
    assert span.name == "jobs.job.report.build"
    assert span.kind == SpanKind.INTERNAL
    attributes = dict(span.attributes)
    assert attributes["job.id"] == job_id
    assert attributes["job.type"] == "report.build"
    assert attributes["job.attempt"] == 1
    assert attributes["job.outcome"] == "completed"
    assert isinstance(attributes["job.duration_ms"], float)
    assert attributes["job.duration_ms"] >= 0
    assert span.status.status_code == StatusCode.UNSET


async def test_a_failed_execution_records_the_error(span_exporter: InMemorySpanExporter) -> None:
    async def broken(payload: Any) -> None:
        raise RuntimeError("printer on fire")

    await run_jobs(broken)
    (span,) = job_spans(span_exporter)
    assert span.attributes["job.outcome"] == "failed"
    assert span.status.status_code == StatusCode.ERROR
    assert span.status.description == "RuntimeError: printer on fire"
    (event,) = span.events
    assert event.name == "exception"
    assert event.attributes["exception.type"] == "RuntimeError"


async def test_the_execution_span_links_to_the_request_that_enqueued(
    span_exporter: InMemorySpanExporter,
) -> None:
    async def works(payload: Any) -> None: ...

    await run_jobs(works, in_request=True)
    request = next(s for s in span_exporter.get_finished_spans() if s.name == "POST /reports")
    (span,) = job_spans(span_exporter)
    (link,) = span.links
    assert link.context.trace_id == request.context.trace_id
    assert link.context.span_id == request.context.span_id


async def test_without_a_trace_there_is_no_link(span_exporter: InMemorySpanExporter) -> None:
    async def works(payload: Any) -> None: ...

    await run_jobs(works)
    (span,) = job_spans(span_exporter)
    assert not span.links


def test_traceparent_round_trip(span_exporter: InMemorySpanExporter) -> None:
    assert current_traceparent() is None
    with trace.get_tracer("test").start_as_current_span("outer") as outer:
        value = current_traceparent()
    assert value is not None
    parsed = parse_traceparent(value)
    assert parsed is not None
    assert parsed.trace_id == outer.get_span_context().trace_id
    assert parse_traceparent("garbage") is None
    assert parse_traceparent("00-" + "0" * 32 + "-" + "0" * 16 + "-01") is None
