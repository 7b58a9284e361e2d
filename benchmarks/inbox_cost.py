"""What the inbox costs a handler: the same effect write with and without it.

``n`` jobs drained by one runner (concurrency 10); each handler commits one row to an effects
table. "plain": the row in a transaction of its own (``tm.transaction()``). "inbox": the same
row inside ``@job_handler(..., inbox=...)``: one more INSERT (the job's identity, ON CONFLICT DO
NOTHING) in that transaction. Jobs in-process (the inbox's cost alone), and, for PostgreSQL,
also a SQLAlchemy job store on the effects' database, where the inbox completes the job in its
own transaction (and the runner's complete makes no call). Per job: wall time / n.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import BigInteger, Column, Integer, MetaData, String, Table

from jobs import (
    InProcessJobDriver,
    JobContext,
    JobDriver,
    JobHandlerRegistry,
    JobQueue,
    JobRunner,
    JobsSettings,
    NewJob,
    job_handler,
)
from jobs.testing.chaos import drop_store
from orm_sqlalchemy import (
    SQLAlchemyInbox,
    SQLAlchemyJobStore,
    SQLAlchemyTransactionManager,
    create_engine,
)

from .drivers import POSTGRES_URL

JOB = "bench.effect"
CASES = (
    ("sqlite", "inprocess"),
    ("postgres", "inprocess"),
    ("postgres", "postgres"),
)


async def drain_seconds(effects: str, jobs: str, *, inbox: bool, n: int) -> float:
    """Seconds to drain ``n`` jobs whose handler commits one effect row."""
    prefix = f"bench{uuid.uuid4().hex[:8]}_"
    with tempfile.TemporaryDirectory(prefix="neverlost-inbox-") as tmp:
        url = (
            POSTGRES_URL if effects == "postgres" else f"sqlite+aiosqlite:///{Path(tmp) / 'fx.db'}"
        )
        engine = create_engine(url)
        tm = SQLAlchemyTransactionManager(engine)
        metadata = MetaData()
        rows = Table(
            f"{prefix}effects",
            metadata,
            # SQLite numbers only an INTEGER PRIMARY KEY itself (a BIGINT one stays NULL)
            Column(
                "id",
                BigInteger().with_variant(Integer, "sqlite"),
                primary_key=True,
                autoincrement=True,
            ),
            Column("job", String(64), nullable=False),
        )
        the_inbox = SQLAlchemyInbox(tm, table_prefix=prefix, metadata=metadata)
        driver: JobDriver = (
            InProcessJobDriver()
            if jobs == "inprocess"
            else SQLAlchemyJobStore(url, table_prefix=prefix)
        )
        try:
            async with engine.begin() as conn:
                await conn.run_sync(metadata.create_all)
            registry = JobHandlerRegistry()
            if inbox:

                @job_handler(JOB, inbox=the_inbox)
                async def through_inbox(payload: Any, ctx: JobContext) -> None:
                    await tm.session.execute(rows.insert().values(job=ctx.id))

                registry.add(through_inbox)
            else:

                @job_handler(JOB)
                async def plain(payload: Any, ctx: JobContext) -> None:
                    async with tm.transaction() as session:
                        await session.execute(rows.insert().values(job=ctx.id))

                registry.add(plain)
            queue = JobQueue(driver)
            for start in range(0, n, 500):
                await queue.enqueue_many(
                    NewJob(type=JOB, payload={"n": i}) for i in range(start, min(n, start + 500))
                )
            runner = JobRunner(driver, registry, JobsSettings(concurrency=10, poll_interval_ms=20))
            began = time.perf_counter()
            runner.start()
            try:
                while True:
                    counts = await driver.counts()
                    if counts["pending"] == 0 and counts["active"] == 0:
                        break
                    await asyncio.sleep(0.005)
                elapsed = time.perf_counter() - began
            finally:
                await runner.close(drain_timeout_ms=5_000)
            if counts.get("completed", 0) != n:  # a handler that fails is no measurement
                raise RuntimeError(f"inbox bench ({effects}, jobs {jobs}): {counts}, not {n} done")
            return elapsed
        finally:
            await driver.close()
            await engine.dispose()
            if effects == "postgres":
                await drop_store(POSTGRES_URL, prefix)


async def inbox_cost_rows(runs: int, n: int = 2_000) -> list[list[str]]:
    """Per case: plain and inbox microseconds per job (median [min-max]), and the difference,
    alternating the two in one sitting."""
    table = []
    for effects, jobs in CASES:
        plain: list[float] = []
        through: list[float] = []
        for _ in range(runs):
            plain.append(await drain_seconds(effects, jobs, inbox=False, n=n) / n * 1e6)
            through.append(await drain_seconds(effects, jobs, inbox=True, n=n) / n * 1e6)
        cost = statistics.median(through) - statistics.median(plain)
        table.append([f"{effects} (jobs {jobs})", _fmt(plain), _fmt(through), f"{cost:+,.0f}"])
    return table


def _fmt(samples: list[float]) -> str:
    low, mid, high = min(samples), statistics.median(samples), max(samples)
    return f"{mid:,.0f} [{low:,.0f}-{high:,.0f}]"
