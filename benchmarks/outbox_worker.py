"""The relay and runner of the outbox-under-load row, in a process of their own.

``python -m benchmarks.outbox_worker URL PREFIX JOBS_ON [NAMESPACE]``: an outbox relay (batch
100) and a runner (concurrency 10) on the outbox table ``<PREFIX>entries`` and the jobs on the
same database (``JOBS_ON`` = same) or in a Redis namespace (redis), as ``neverlost worker``
runs them beside an app. Prints ``ready`` once both run, then reads the number of entries
committed from stdin, waits until that many handlers started (60 s at most) and prints one
JSON object: entry number -> ``time.perf_counter()`` at handler start. ``perf_counter`` is
CLOCK_MONOTONIC on Linux, one clock for every process of the machine.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from contextlib import AsyncExitStack
from typing import Any

from loguru import logger

from jobs import (
    JobDriver,
    JobHandlerRegistry,
    JobOutboxPublisher,
    JobQueue,
    JobRunner,
    JobsSettings,
    OutboxRelay,
)
from jobs.logs import enable_logging
from orm_sqlalchemy import (
    SQLAlchemyJobStore,
    SQLAlchemyOutboxStore,
    SQLAlchemyTransactionManager,
    create_engine,
)

from .drivers import REDIS_URL


def relay_and_runner(
    jobs: JobDriver, outbox: SQLAlchemyOutboxStore, started_at: dict[int, float]
) -> tuple[JobRunner, OutboxRelay]:
    """The row's runner (concurrency 10, a handler noting when entry n started) and relay
    (batch 100), not started: the same pair in the producers' process or in this one."""

    async def handler(payload: Any) -> None:
        started_at[payload["n"]] = time.perf_counter()

    registry = JobHandlerRegistry()
    registry.register("order.placed", handler)
    runner = JobRunner(jobs, registry, JobsSettings(concurrency=10))
    return runner, OutboxRelay(outbox, JobOutboxPublisher(JobQueue(jobs)), batch_size=100)


async def work(url: str, prefix: str, jobs_on: str, namespace: str) -> None:
    async with AsyncExitStack() as stack:
        engine = create_engine(url)
        stack.push_async_callback(engine.dispose)
        outbox = SQLAlchemyOutboxStore(
            transaction_manager=SQLAlchemyTransactionManager(engine), table_prefix=prefix
        )
        stack.push_async_callback(outbox.close)
        jobs: JobDriver
        if jobs_on == "redis":
            from redis_jobs import RedisJobDriver

            jobs = RedisJobDriver(url=REDIS_URL, namespace=namespace)
        else:
            jobs = SQLAlchemyJobStore(engine=engine, table_prefix=prefix)
        stack.push_async_callback(jobs.close)
        started_at: dict[int, float] = {}
        runner, relay = relay_and_runner(jobs, outbox, started_at)
        runner.start()
        relay.start()
        try:
            print("ready", flush=True)
            line = await asyncio.to_thread(sys.stdin.readline)
            total = int(line)
            wait_until = time.perf_counter() + 60
            while len(started_at) < total and time.perf_counter() < wait_until:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        finally:
            await runner.close()
            await relay.close()
        print(json.dumps(started_at), flush=True)


def main() -> None:
    logger.remove()
    logger.add(sys.stderr, level="WARNING")
    enable_logging()  # the library's lines are off until an app enables them
    url, prefix, jobs_on = sys.argv[1:4]
    namespace = sys.argv[4] if len(sys.argv) > 4 else ""
    asyncio.run(work(url, prefix, jobs_on, namespace))


if __name__ == "__main__":
    main()
