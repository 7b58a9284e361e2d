"""Benchmarks under load, each beside the physical reference measured in the same run.

* I/O-bound drain: ``n`` jobs whose handler awaits ``sleep_ms``, runner concurrency ``c``;
  reference: a bare ``asyncio.Semaphore(c)`` loop running the same sleeps (no store at all).
* Bulk enqueue: batches of ``batch`` jobs through ``JobQueue.enqueue_many``.
* Single enqueue one by one; reference on Redis: a bare redis-py loop calling a one-command
  Lua script (EVALSHA) per job; on PostgreSQL: a bare asyncpg loop, one INSERT transaction per
  job.

Every function returns jobs (or calls) per second.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from jobs import JobDriver, JobHandlerRegistry, JobQueue, JobRunner, JobsSettings, NewJob

from .scenarios import JOB_TYPE, PAYLOAD


async def io_drain_rate(driver: JobDriver, n: int, concurrency: int, sleep_ms: float) -> float:
    """Jobs per second for a runner to complete ``n`` queued jobs that each await ``sleep_ms``."""
    queue = JobQueue(driver)
    for start in range(0, n, 1_000):
        await queue.enqueue_many(
            [NewJob(type=JOB_TYPE, payload=PAYLOAD) for _ in range(min(1_000, n - start))]
        )
    done = asyncio.Event()
    completed = 0
    pause = sleep_ms / 1000

    async def io_bound(payload: Any) -> None:
        nonlocal completed
        await asyncio.sleep(pause)
        completed += 1
        if completed == n:
            done.set()

    registry = JobHandlerRegistry()
    registry.register(JOB_TYPE, io_bound)
    runner = JobRunner(driver, registry, JobsSettings(concurrency=concurrency))
    started = time.perf_counter()
    runner.start()
    await asyncio.wait_for(done.wait(), timeout=600)
    while runner.stats["completed"] < n:  # noqa: ASYNC110 - a counter, polled
        await asyncio.sleep(0.0005)
    elapsed = time.perf_counter() - started
    await runner.close()
    return n / elapsed


async def bare_semaphore_rate(n: int, concurrency: int, sleep_ms: float) -> float:
    """The reference: ``n`` sleeps of ``sleep_ms`` through an ``asyncio.Semaphore``."""
    semaphore = asyncio.Semaphore(concurrency)
    pause = sleep_ms / 1000

    async def one() -> None:
        async with semaphore:
            await asyncio.sleep(pause)

    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(n)))
    return n / (time.perf_counter() - started)


async def bulk_enqueue_rate(driver: JobDriver, n: int, batch: int) -> float:
    """Jobs per second through ``enqueue_many`` in batches of ``batch``."""
    queue = JobQueue(driver)
    jobs = [NewJob(type=JOB_TYPE, payload=PAYLOAD) for _ in range(batch)]
    started = time.perf_counter()
    for _ in range(n // batch):
        await queue.enqueue_many(jobs)
    return (n // batch) * batch / (time.perf_counter() - started)


async def redis_script_loop_rate(url: str, n: int) -> float:
    """The Redis reference: one EVALSHA of a one-command script (an HSET) per call."""
    import uuid

    from redis.asyncio import Redis

    client = Redis.from_url(url)
    key = f"bench-ref-{uuid.uuid4().hex[:8]}"
    try:
        script = client.register_script("return redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])")
        started = time.perf_counter()
        for index in range(n):
            await script(keys=[key], args=[index, "x"])
        return n / (time.perf_counter() - started)
    finally:
        await client.delete(key)
        await client.aclose()


async def asyncpg_insert_loop_rate(url: str, n: int) -> float:
    """The PostgreSQL reference: one INSERT per transaction (autocommit), on one connection."""
    import uuid

    import asyncpg  # type: ignore[import-untyped]

    dsn = url.replace("postgresql+asyncpg://", "postgresql://")
    connection = await asyncpg.connect(dsn)
    table = f"bench_ref_{uuid.uuid4().hex[:8]}"
    try:
        await connection.execute(f"CREATE TABLE {table} (id text PRIMARY KEY, payload text)")
        started = time.perf_counter()
        for index in range(n):
            await connection.execute(
                f"INSERT INTO {table} VALUES ($1, $2)", str(index), '{"order_id": 12345}'
            )
        return n / (time.perf_counter() - started)
    finally:
        await connection.execute(f"DROP TABLE IF EXISTS {table}")
        await connection.close()
