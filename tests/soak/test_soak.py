"""Soak: minutes of steady load (1 % of handlers raise, 1 % time out) with pruning on, and the
process and the store stay bounded: RSS flat after warm-up, tasks, sockets and records bounded.

``NEVERLOST_SOAK_SECONDS`` sets the length (default 300 s per store).
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from framework import ApplicationBuilder, configuration, entry
from jobs import (
    JOB_DRIVER,
    JOB_QUEUE,
    JOB_RUNNER,
    JOBS_SETTINGS,
    JobContext,
    JobDriver,
    JobQueue,
    JobsAutoConfiguration,
    JobsSettings,
    job_handler,
)
from redis_jobs.driver import EXPIRY_MARGIN_MS
from tests.soak.support import (
    KINDS,
    Sample,
    sample,
    slope_mb_per_min,
    stored_records,
    url_of,
)
from tests.stores import StoreTarget

SECONDS = float(os.environ.get("NEVERLOST_SOAK_SECONDS", "300"))
RATE = 100  # jobs per second
RETAIN_MS = 5_000
CONCURRENCY = 10


class SoakHandlers:
    def __init__(self) -> None:
        self.outcomes = {"ok": 0, "raised": 0, "timed_out": 0}

    @job_handler("soak.work", max_attempts=1, timeout_ms=100)
    async def work(self, payload: dict[str, Any], ctx: JobContext) -> None:
        kind = payload["n"] % 100
        if kind == 0:
            self.outcomes["raised"] += 1
            raise RuntimeError("one in a hundred raises")
        if kind == 1:
            self.outcomes["timed_out"] += 1
            await asyncio.sleep(1)  # past timeout_ms: cancelled
        self.outcomes["ok"] += 1
        await asyncio.sleep(0.001)


def open_driver(kind: str, url: str, namespace: str) -> JobDriver:
    if kind == "redis":
        from redis_jobs import RedisJobDriver

        return RedisJobDriver(
            url=url, namespace=namespace, retain_completed_ms=RETAIN_MS, retain_failed_ms=RETAIN_MS
        )
    from orm_sqlalchemy import SQLAlchemyJobStore

    return SQLAlchemyJobStore(
        url, table_prefix=namespace, retain_completed_ms=RETAIN_MS, retain_failed_ms=RETAIN_MS,
        prune_interval_ms=1_000,
    )  # fmt: skip


def soak_configuration(kind: str, url: str, namespace: str, handlers: SoakHandlers) -> type:
    @configuration
    class SoakConfiguration:
        @entry(JOB_DRIVER)
        def job_driver(self) -> JobDriver:
            return open_driver(kind, url, namespace)

        @entry(JOBS_SETTINGS)
        def jobs_settings(self) -> JobsSettings:
            return JobsSettings(
                concurrency=CONCURRENCY, lease_ms=5_000, poll_interval_ms=200,
                retain_completed_ms=RETAIN_MS, retain_failed_ms=RETAIN_MS,
            )  # fmt: skip

        @entry()
        def soak_handlers(self) -> SoakHandlers:
            return handlers

    return SoakConfiguration


@pytest.mark.slow
@pytest.mark.timeout(SECONDS * 2 + 120)
@pytest.mark.parametrize("kind", KINDS)
async def test_steady_load_keeps_memory_tasks_sockets_and_store_bounded(
    kind: str, tmp_path: Path
) -> None:
    url = url_of(kind, tmp_path)
    namespace = f"soak{uuid.uuid4().hex[:8]}_"
    handlers = SoakHandlers()
    builder = ApplicationBuilder(
        [JobsAutoConfiguration, soak_configuration(kind, url, namespace, handlers)]
    )
    context = await builder.run()
    samples: list[Sample] = []
    records: list[int] = []
    try:
        queue: JobQueue = context.get_value(JOB_QUEUE)
        context.get_value(JOB_RUNNER).start()
        started = time.monotonic()
        next_sample = started
        n = 0
        while (elapsed := time.monotonic() - started) < SECONDS:
            due = int(elapsed * RATE) + 1
            while n < due:
                await queue.enqueue("soak.work", {"n": n})
                n += 1
            if time.monotonic() >= next_sample:
                samples.append(sample(elapsed))
                records.append(await stored_records(kind, url, namespace))
                next_sample += max(SECONDS / 60, 1.0)
            await asyncio.sleep(0.01)
    finally:
        await context.close()
        await StoreTarget(kind, url, namespace).drop()

    assert sum(handlers.outcomes.values()) >= n * 0.9, handlers.outcomes
    assert handlers.outcomes["raised"] > 0
    assert handlers.outcomes["timed_out"] > 0
    steady = samples[len(samples) // 5 :]  # after a fifth of the run: warm-up
    warm = samples[: len(samples) // 5] or samples[:1]
    assert slope_mb_per_min(steady) < 1.0, [round(s.rss_mb, 1) for s in samples]
    assert max(s.tasks for s in steady) <= max(s.tasks for s in warm) + 3 * CONCURRENCY
    assert max(s.sockets for s in steady) <= max(s.sockets for s in warm) + 10
    assert max(s.fds for s in steady) <= max(s.fds for s in warm) + 10
    # the store holds about RATE x retention records (Redis: plus its expiry margin of real
    # time), not everything ever run
    window_s = (RETAIN_MS + (EXPIRY_MARGIN_MS if kind == "redis" else 0)) / 1000
    bound = RATE * window_s * 2 + 500
    assert max(records[len(records) // 5 :]) <= bound, records
