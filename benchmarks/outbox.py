"""Commit-to-handler latency through the whole outbox path, on SQLite and PostgreSQL.

One order at a time: a transaction appends an outbox entry and commits; the relay (woken by the
commit) enqueues the job into the job store on the same database; the runner (woken by the
enqueue) starts the handler. The figure is from the commit's return to the handler's start.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from jobs import (
    JobHandlerRegistry,
    JobOutboxPublisher,
    JobQueue,
    JobRunner,
    JobsSettings,
    OutboxRelay,
)
from orm_sqlalchemy import (
    SQLAlchemyJobStore,
    SQLAlchemyOutboxStore,
    SQLAlchemyTransactionManager,
    create_engine,
)
from orm_sqlalchemy.factory import drop_prefixed_tables

from .drivers import POSTGRES_URL


@asynccontextmanager
async def database(kind: str) -> AsyncIterator[tuple[str, str]]:
    """A database URL and a fresh table prefix on it."""
    prefix = f"bench{uuid.uuid4().hex[:8]}_"
    if kind == "sqlite":
        with tempfile.TemporaryDirectory() as scratch:
            yield f"sqlite+aiosqlite:///{Path(scratch) / 'outbox.db'}", prefix
        return
    try:
        yield POSTGRES_URL, prefix
    finally:
        engine = create_engine(POSTGRES_URL)
        async with engine.begin() as conn:
            await drop_prefixed_tables(conn, prefix)
        await engine.dispose()


async def commit_to_handler(kind: str, samples: int) -> tuple[float, float]:
    """p50 and p99 milliseconds from commit to handler start."""
    async with database(kind) as (url, prefix):
        engine = create_engine(url)
        tm = SQLAlchemyTransactionManager(engine)
        outbox = SQLAlchemyOutboxStore(transaction_manager=tm, table_prefix=prefix)
        jobs = SQLAlchemyJobStore(engine=engine, table_prefix=prefix)
        await outbox.create_schema()
        await jobs.create_schema()
        started: list[float] = []
        arrived = asyncio.Event()

        async def handler(payload: Any) -> None:
            started.append(time.perf_counter())
            arrived.set()

        registry = JobHandlerRegistry()
        registry.register("order.placed", handler)
        runner = JobRunner(jobs, registry, JobsSettings(poll_interval_ms=10_000))
        relay = OutboxRelay(outbox, JobOutboxPublisher(JobQueue(jobs)), poll_interval_ms=10_000)
        runner.start()
        relay.start()
        await asyncio.sleep(0.2)
        latencies: list[float] = []
        try:
            for n in range(samples):
                arrived.clear()
                async with tm.transaction():
                    await outbox.append("order.placed", {"order_id": n})
                committed = time.perf_counter()
                await asyncio.wait_for(arrived.wait(), timeout=30)
                latencies.append((started[-1] - committed) * 1000)
        finally:
            await runner.close()
            await relay.close()
            await jobs.close()
            await outbox.close()
            await engine.dispose()
    latencies.sort()
    return statistics.median(latencies), latencies[min(len(latencies) - 1, int(samples * 0.99))]
