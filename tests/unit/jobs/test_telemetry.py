from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from jobs import InProcessJobDriver, JobHandlerRegistry, JobQueue, JobRunner, NewJob
from jobs.errors import PayloadError
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


async def test_one_consumer_span_per_execution_with_its_attributes(
    span_exporter: InMemorySpanExporter,
) -> None:
    async def works(payload: Any) -> None: ...

    _, (job_id,) = await run_jobs(works)
    (span,) = job_spans(span_exporter)
    assert span.name == "jobs.job.report.build"
    assert span.kind == SpanKind.CONSUMER
    attributes = dict(span.attributes)
    assert attributes["messaging.system"] == "neverlost"
    assert attributes["messaging.operation.type"] == "process"
    assert attributes["messaging.destination.name"] == "report.build"
    assert attributes["messaging.message.id"] == job_id
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


def named(exporter: InMemorySpanExporter, name: str) -> Any:
    (span,) = [span for span in exporter.get_finished_spans() if span.name == name]
    return span


async def test_the_execution_is_in_the_trace_of_the_request_that_enqueued(
    span_exporter: InMemorySpanExporter,
) -> None:
    async def works(payload: Any) -> None: ...

    _, (job_id,) = await run_jobs(works, in_request=True)
    request = named(span_exporter, "POST /reports")
    enqueue = named(span_exporter, "jobs.enqueue report.build")
    (execution,) = job_spans(span_exporter)
    assert enqueue.kind == SpanKind.PRODUCER
    assert enqueue.parent.span_id == request.context.span_id
    assert execution.parent.span_id == enqueue.context.span_id
    assert {request.context.trace_id, enqueue.context.trace_id, execution.context.trace_id} == {
        request.context.trace_id
    }
    assert dict(enqueue.attributes) == {
        "messaging.system": "neverlost",
        "messaging.operation.type": "send",
        "messaging.operation.name": "enqueue",
        "messaging.destination.name": "report.build",
        "messaging.message.id": job_id,
        "job.type": "report.build",
        "job.id": job_id,
    }


async def test_without_a_request_the_trace_begins_at_the_enqueue(
    span_exporter: InMemorySpanExporter,
) -> None:
    async def works(payload: Any) -> None: ...

    await run_jobs(works)
    enqueue = named(span_exporter, "jobs.enqueue report.build")
    (execution,) = job_spans(span_exporter)
    assert enqueue.parent is None
    assert execution.parent.span_id == enqueue.context.span_id


async def test_a_dropped_enqueue_says_its_key_was_taken(
    span_exporter: InMemorySpanExporter,
) -> None:
    queue = JobQueue(InProcessJobDriver())
    assert await queue.enqueue("t", key="k") is not None
    assert await queue.enqueue("t", key="k") is None
    first, second = [s for s in span_exporter.get_finished_spans() if s.name == "jobs.enqueue t"]
    assert "job.key_taken" not in first.attributes
    assert second.attributes["job.key_taken"] is True


async def test_a_refused_enqueue_records_its_error(span_exporter: InMemorySpanExporter) -> None:
    queue = JobQueue(InProcessJobDriver())
    with pytest.raises(PayloadError):
        await queue.enqueue("t", {"when": {1, 2}})
    span = named(span_exporter, "jobs.enqueue t")
    assert span.status.status_code == StatusCode.ERROR
    assert span.events[0].attributes["exception.type"] == "jobs.errors.PayloadError"


async def test_a_batch_is_one_producer_span_linked_to_the_contexts_its_jobs_carry(
    span_exporter: InMemorySpanExporter,
) -> None:
    queue = JobQueue(InProcessJobDriver())
    with trace.get_tracer("test").start_as_current_span("POST /orders") as request:
        origin = current_traceparent()
    ids = await queue.enqueue_many([NewJob(type="t", trace_context=origin), NewJob(type="t")])
    span = named(span_exporter, "jobs.enqueue t")
    assert span.kind == SpanKind.PRODUCER
    assert span.attributes["messaging.batch.message_count"] == 2
    (link,) = span.links
    assert link.context.span_id == request.get_span_context().span_id
    carried = [(await queue.driver.claim(1, 1_000, ["t"]))[0].trace_context for _ in ids]
    assert carried[0] == origin
    assert parse_traceparent(carried[1]).span_id == span.context.span_id  # type: ignore[union-attr]


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


def test_without_an_sdk_a_propagated_context_is_carried_as_it_is() -> None:
    """In a fresh process with no tracer provider: no spans, and the request's incoming
    traceparent (propagated by a web framework) is what the job stores."""
    script = textwrap.dedent(
        """
        import asyncio
        from opentelemetry import context
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
        from jobs import InProcessJobDriver, JobQueue

        INCOMING = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

        async def main():
            driver = InProcessJobDriver()
            incoming = TraceContextTextMapPropagator().extract({"traceparent": INCOMING})
            token = context.attach(incoming)
            try:
                await JobQueue(driver).enqueue("t")
            finally:
                context.detach(token)
            await JobQueue(driver).enqueue("t")
            first, second = await driver.claim(2, 1000, ["t"])
            print(first.trace_context == INCOMING, second.trace_context)

        asyncio.run(main())
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "None"]


def test_a_tracer_provider_installed_after_the_first_jobs_traces_the_next_ones() -> None:
    """In a fresh process: jobs enqueued and run before any provider is set make no spans;
    once one is set (after jobs already ran through the no-SDK path), the next job has its
    enqueue and execution spans, in one trace."""
    script = textwrap.dedent(
        """
        import asyncio
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )
        from jobs import InProcessJobDriver, JobHandlerRegistry, JobQueue, JobRunner

        async def run_one(driver, queue, registry, done):
            await queue.enqueue("t")
            runner = JobRunner(driver, registry)
            runner.start()
            await asyncio.wait_for(done.get(), 10)
            await runner.close()

        async def main():
            driver = InProcessJobDriver()
            queue = JobQueue(driver)
            done = asyncio.Queue()
            registry = JobHandlerRegistry()

            async def handler(payload):
                done.put_nowait(payload)

            registry.register("t", handler)
            await run_one(driver, queue, registry, done)
            exporter = InMemorySpanExporter()
            provider = TracerProvider()
            provider.add_span_processor(SimpleSpanProcessor(exporter))
            trace.set_tracer_provider(provider)
            await run_one(driver, queue, registry, done)
            spans = {span.name: span for span in exporter.get_finished_spans()}
            enqueue, job = spans["jobs.enqueue t"], spans["jobs.job.t"]
            print(sorted(spans), job.parent.span_id == enqueue.context.span_id)

        asyncio.run(main())
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["['jobs.enqueue", "t',", "'jobs.job.t']", "True"]
