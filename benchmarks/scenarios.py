"""Benchmark scenarios, written once for any JobDriver: enqueue, drain, wake-up latency.

Work is fixed (N no-op jobs, one fixed payload); time is what is measured.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from jobs import JobDriver, JobHandlerRegistry, JobQueue, JobRunner, JobsSettings

JOB_TYPE = "bench.noop"
PAYLOAD = {"order_id": 12345, "email": "customer@example.com", "items": [1, 2, 3]}


async def enqueue_rate(driver: JobDriver, n: int) -> float:
    """Jobs per second enqueued one call at a time."""
    queue = JobQueue(driver)
    started = time.perf_counter()
    for _ in range(n):
        await queue.enqueue(JOB_TYPE, PAYLOAD)
    return n / (time.perf_counter() - started)


async def drain_rate(driver: JobDriver, n: int, concurrency: int = 10) -> float:
    """Jobs per second for a runner to complete ``n`` queued no-op jobs (from its start)."""
    queue = JobQueue(driver)
    for _ in range(n):
        await queue.enqueue(JOB_TYPE, PAYLOAD)
    return n / await drain(driver, n, concurrency)


async def drain(driver: JobDriver, n: int, concurrency: int = 10) -> float:
    """Run a runner until it has handled and settled ``n`` queued no-op jobs, then close it;
    the seconds from its start until the last settle (the close not counted)."""
    done = asyncio.Event()
    completed = 0

    async def noop(payload: Any) -> None:
        nonlocal completed
        completed += 1
        if completed == n:
            done.set()

    runner = _runner(driver, noop, concurrency)
    started = time.perf_counter()
    runner.start()
    try:
        await asyncio.wait_for(done.wait(), timeout=600)
        await _settled(runner, n)
        return time.perf_counter() - started
    finally:
        await runner.close()


async def start_latency(driver: JobDriver, samples: int) -> tuple[float, float]:
    """p50 and p99 milliseconds from enqueue to handler start, one job at a time, idle runner."""
    queue = JobQueue(driver)
    started_at: list[float] = []
    arrived = asyncio.Event()

    async def record(payload: Any) -> None:
        started_at.append(time.perf_counter())
        arrived.set()

    runner = _runner(driver, record, 10, poll_interval_ms=10_000)
    runner.start()
    await asyncio.sleep(0.05)
    latencies: list[float] = []
    for index in range(samples):
        arrived.clear()
        sent = time.perf_counter()
        await queue.enqueue(JOB_TYPE, PAYLOAD)
        await asyncio.wait_for(arrived.wait(), timeout=30)
        latencies.append((started_at[-1] - sent) * 1000)
        await _settled(runner, index + 1)
    await runner.close()
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return statistics.median(latencies), p99


def _runner(driver: JobDriver, handler: Any, concurrency: int, **settings: Any) -> JobRunner:
    registry = JobHandlerRegistry()
    registry.register(JOB_TYPE, handler)
    return JobRunner(driver, registry, JobsSettings(concurrency=concurrency, **settings))


async def _settled(runner: JobRunner, completed: int) -> None:
    """Wait until the runner has settled ``completed`` jobs (a counter, so it is polled)."""
    while runner.stats["completed"] < completed:  # noqa: ASYNC110 - no event on the hot path
        await asyncio.sleep(0.0005)
