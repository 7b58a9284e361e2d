"""The meter ``neverlost`` read with the SDK's in-memory reader: executions, durations, lost
leases, enqueues, and the queue depth gauge read from ``stats()`` at most every few seconds.

Sums are cumulative for the whole test process, so each test uses job types of its own.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import uuid
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from jobs import (
    InProcessJobDriver,
    JobHandlerRegistry,
    JobQueue,
    JobRunner,
    JobScheduler,
    JobsSettings,
    ManualClock,
    NewJob,
    Schedule,
)
from jobs.spi import JobTypeStats
from jobs.telemetry import parse_traceparent
from tests.support import attrs, metric_points, wait_until


def fresh(name: str) -> str:
    return f"{name}.{uuid.uuid4().hex[:8]}"


class CountingDriver(InProcessJobDriver):
    """The in-process driver, counting how often the gauge's source is read."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.stats_calls = 0

    async def stats(self) -> dict[str, JobTypeStats]:
        self.stats_calls += 1
        return await super().stats()


async def test_executions_durations_and_enqueues_by_type_and_outcome(
    metric_reader: InMemoryMetricReader,
) -> None:
    works, breaks = fresh("m.works"), fresh("m.breaks")
    driver = InProcessJobDriver()
    registry = JobHandlerRegistry()

    async def ok(payload: Any) -> None: ...

    async def broken(payload: Any) -> None:
        raise RuntimeError("no")

    registry.register(works, ok)
    registry.register(breaks, broken, max_attempts=2, backoff=lambda attempt: 0)
    queue = JobQueue(driver)
    assert await queue.enqueue(works, key="once") is not None
    assert await queue.enqueue(works, key="once") is None  # dropped: not counted
    await queue.enqueue_many([NewJob(type=works), NewJob(type=breaks)])
    runner = JobRunner(driver, registry, JobsSettings(poll_interval_ms=20))
    runner.start()
    await wait_until(lambda: runner.stats["completed"] == 2 and runner.stats["failed"] == 1)
    await runner.close()

    enqueued = metric_points(metric_reader, "jobs.enqueued")
    assert enqueued[attrs(job_type=works)] == 2
    assert enqueued[attrs(job_type=breaks)] == 1
    executions = metric_points(metric_reader, "jobs.executions")
    assert executions[attrs(job_type=works, job_outcome="completed")] == 2
    assert executions[attrs(job_type=breaks, job_outcome="retry")] == 1
    assert executions[attrs(job_type=breaks, job_outcome="failed")] == 1
    durations = metric_points(metric_reader, "jobs.duration")
    completed = durations[attrs(job_type=works, job_outcome="completed")]
    assert completed.count == 2
    assert 0 <= completed.min <= completed.max < 5_000
    assert not any(
        dict(key).get("job.type") in (works, breaks)
        for key in metric_points(metric_reader, "jobs.lease.lost")
    )


async def test_a_lost_lease_is_counted(metric_reader: InMemoryMetricReader) -> None:
    job_type = fresh("m.lost")
    clock = ManualClock()
    driver = InProcessJobDriver(clock=clock)
    registry = JobHandlerRegistry()
    release = asyncio.Event()

    async def held(payload: Any) -> None:
        await release.wait()

    registry.register(job_type, held)
    await JobQueue(driver).enqueue(job_type)
    settings = JobsSettings(lease_ms=1_000, heartbeat_ms=20, poll_interval_ms=20)
    runner = JobRunner(driver, registry, settings)
    runner.start()
    await wait_until(lambda: runner.in_flight == 1)
    clock.advance(1_001)
    assert len(await driver.claim(1, 60_000, [job_type])) == 1  # someone else takes it over
    await wait_until(lambda: runner.stats["lease_lost"] == 1, message="the lost lease noticed")
    release.set()
    await runner.close()
    assert metric_points(metric_reader, "jobs.lease.lost")[attrs(job_type=job_type)] == 1
    executions = metric_points(metric_reader, "jobs.executions")
    assert executions[attrs(job_type=job_type, job_outcome="lease_lost")] == 1


async def test_the_queue_depth_is_read_from_stats_at_most_every_few_seconds(
    metric_reader: InMemoryMetricReader,
) -> None:
    job_type, later = fresh("m.depth"), fresh("m.later")
    driver = CountingDriver()
    queue = JobQueue(driver)
    for _ in range(3):
        await queue.enqueue(job_type)
    await queue.enqueue(later, delay_ms=3_600_000)
    registry = JobHandlerRegistry()

    async def never(payload: Any) -> None: ...

    registry.register(fresh("m.other"), never)  # the runner claims none of the jobs above
    runner = JobRunner(driver, registry)
    runner.start()
    try:

        def depth() -> dict[frozenset[tuple[str, Any]], Any]:
            return metric_points(metric_reader, "jobs.queue.depth")

        await wait_until(lambda: attrs(job_type=job_type, job_state="due") in depth())
        points = depth()
        assert points[attrs(job_type=job_type, job_state="due")] == 3
        assert points[attrs(job_type=job_type, job_state="active")] == 0
        assert points[attrs(job_type=later, job_state="scheduled")] == 1
        oldest = metric_points(metric_reader, "jobs.queue.oldest_due_age")
        assert oldest[attrs(job_type=job_type)] >= 0
        calls = driver.stats_calls
        for _ in range(20):
            depth()
            await asyncio.sleep(0)
        assert driver.stats_calls == calls == 1  # many collections, one read in 5 s
    finally:
        await runner.close()
    await asyncio.sleep(0)
    assert attrs(job_type=job_type, job_state="due") not in metric_points(
        metric_reader, "jobs.queue.depth"
    )  # a closed runner's store is no longer read


def test_without_a_meter_provider_nothing_is_read() -> None:
    """In a fresh process with no SDK: a runner's store is never read for a gauge."""
    script = textwrap.dedent(
        """
        import asyncio
        from jobs import InProcessJobDriver, JobHandlerRegistry, JobQueue, JobRunner

        class Counting(InProcessJobDriver):
            calls = 0
            async def stats(self):
                Counting.calls += 1
                return await super().stats()

        async def main():
            driver = Counting()
            registry = JobHandlerRegistry()
            done = asyncio.Event()
            async def handler(payload):
                done.set()
            registry.register("t", handler)
            runner = JobRunner(driver, registry)
            runner.start()
            await JobQueue(driver).enqueue("t")
            await asyncio.wait_for(done.wait(), 5)
            await runner.close()
            from opentelemetry import metrics
            assert type(metrics.get_meter_provider()).__name__ == "_ProxyMeterProvider"
            print(Counting.calls)

        asyncio.run(main())
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0"


def test_a_meter_provider_set_after_jobs_ran_counts_the_next_ones() -> None:
    """In a fresh process: jobs run before any meter provider is set go uncounted (nothing
    recorded them); once one is set, the next enqueue and execution are counted."""
    script = textwrap.dedent(
        """
        import asyncio
        from opentelemetry import metrics
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from jobs import InProcessJobDriver, JobHandlerRegistry, JobQueue, JobRunner

        async def run_one(driver, registry, done):
            await JobQueue(driver).enqueue("t")
            runner = JobRunner(driver, registry)
            runner.start()
            await asyncio.wait_for(done.get(), 10)
            while runner.stats["completed"] < 1:
                await asyncio.sleep(0.001)
            await runner.close()

        def points(reader, name):
            data = reader.get_metrics_data()
            return [
                point.value
                for resource in data.resource_metrics
                for scope in resource.scope_metrics
                for metric in scope.metrics
                if metric.name == name
                for point in metric.data.data_points
            ]

        async def main():
            driver = InProcessJobDriver()
            registry = JobHandlerRegistry()
            done = asyncio.Queue()

            async def handler(payload):
                done.put_nowait(payload)

            registry.register("t", handler)
            await run_one(driver, registry, done)
            reader = InMemoryMetricReader()
            metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
            await run_one(driver, registry, done)
            print(points(reader, "jobs.enqueued"), points(reader, "jobs.executions"))

        asyncio.run(main())
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["[1]", "[1]"]


async def test_a_scheduled_job_is_counted_and_traced_from_its_enqueue(
    metric_reader: InMemoryMetricReader, span_exporter: InMemorySpanExporter
) -> None:
    job_type = fresh("m.cron")
    driver = InProcessJobDriver()
    scheduler = JobScheduler(JobQueue(driver), schedules=[Schedule(cron="* * * * *", job=job_type)])
    report = await scheduler.run_pass()
    assert report.queued
    assert metric_points(metric_reader, "jobs.enqueued")[attrs(job_type=job_type)] == len(
        report.queued
    )
    spans = [s for s in span_exporter.get_finished_spans() if s.name == f"jobs.enqueue {job_type}"]
    assert len(spans) == len(report.queued) + len(report.dropped)
    (job, *_) = await driver.claim(10, 1_000, [job_type])
    origin = parse_traceparent(job.trace_context)
    assert origin is not None
    assert origin.span_id in {span.context.span_id for span in spans}


async def test_a_store_two_runners_share_is_read_until_the_last_one_closes(
    metric_reader: InMemoryMetricReader, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("jobs.metrics.SAMPLE_INTERVAL_S", 0.0)
    job_type = fresh("m.shared")
    driver = CountingDriver()
    await JobQueue(driver).enqueue(job_type, delay_ms=3_600_000)
    first, second = (JobRunner(driver, JobHandlerRegistry()) for _ in range(2))
    key = attrs(job_type=job_type, job_state="scheduled")

    def depth() -> dict[frozenset[tuple[str, Any]], Any]:
        return metric_points(metric_reader, "jobs.queue.depth")

    first.start()
    second.start()
    await wait_until(lambda: key in depth())
    await first.close()
    await first.close()
    await wait_until(lambda: depth().get(key) == 1, message="still read for the second runner")
    await second.close()
    assert key not in depth()
