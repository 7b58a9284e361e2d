"""Start/stop: hundreds of start, enqueue, run, close cycles in one process leave nothing behind:
descriptors, sockets, threads and tasks return to their baseline."""

from __future__ import annotations

import asyncio
import os
import threading
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
    JobDriver,
    JobQueue,
    JobsAutoConfiguration,
    JobsSettings,
    job_handler,
)
from tests.soak.support import KINDS, sample, url_of
from tests.stores import StoreTarget
from tests.support import wait_until

CYCLES = int(os.environ.get("NEVERLOST_CYCLES", "300"))
WARM_UP = 10


class Done:
    def __init__(self) -> None:
        self.ran = asyncio.Event()

    @job_handler("cycle.work")
    async def work(self, payload: Any) -> None:
        self.ran.set()


def cycle_configuration(target: StoreTarget, done: Done) -> type:
    @configuration
    class CycleConfiguration:
        @entry(JOB_DRIVER)
        def job_driver(self) -> JobDriver:
            return target.open()

        @entry(JOBS_SETTINGS)
        def jobs_settings(self) -> JobsSettings:
            return JobsSettings(concurrency=4, poll_interval_ms=200)

        @entry()
        def done(self) -> Done:
            return done

    return CycleConfiguration


async def one_cycle(target: StoreTarget) -> None:
    done = Done()
    configurations = [JobsAutoConfiguration, cycle_configuration(target, done)]
    context = await ApplicationBuilder(configurations).run()
    try:
        context.get_value(JOB_RUNNER).start()
        queue: JobQueue = context.get_value(JOB_QUEUE)
        await queue.enqueue("cycle.work", {})
        await asyncio.wait_for(done.ran.wait(), 10)
    finally:
        await context.close()


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("kind", KINDS)
async def test_start_enqueue_close_cycles_leave_no_descriptor_socket_thread_or_task(
    kind: str, tmp_path: Path
) -> None:
    target = StoreTarget(kind, url_of(kind, tmp_path), f"cyc{uuid.uuid4().hex[:8]}_")
    try:
        for _ in range(WARM_UP):
            await one_cycle(target)
        baseline = sample(0)
        threads = threading.active_count()
        for _ in range(CYCLES):
            await one_cycle(target)
        # closing threads and sockets finish a moment after close() returns
        await wait_until(
            lambda: threading.active_count() <= threads, timeout=10, message="threads back"
        )
        after = sample(0)
    finally:
        await target.drop()
    assert after.fds <= baseline.fds + 2, (baseline, after)
    assert after.sockets <= baseline.sockets + 1, (baseline, after)
    assert after.tasks <= baseline.tasks, (baseline, after)
    assert after.rss_mb <= baseline.rss_mb + 30, (baseline, after)
