"""One server of the multi-process schedule tests: a whole application with scheduler and runner.

``python -m tests.integration.schedules.scheduler_process OPTIONS_JSON`` builds the context
(JobsAutoConfiguration, the store of OPTIONS, a ``report.minutely`` handler with a cron),
prints ``ready`` and waits. On ``go START ANCHOR`` (simulated time, see support.py) it starts
the scheduler and the runner; on ``stop`` (or end of input) it closes the context and prints
``bye``. Each run of the job prints ``ran <job id>``; the scheduler's log lines (``queued <key>
as job <id>``) go to stderr. Any error exits non-zero.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from loguru import logger

from framework import ApplicationBuilder, ApplicationContext, configuration, entry
from jobs import (
    JOB_DRIVER,
    JOB_RUNNER,
    JOB_SCHEDULER,
    JOBS_SETTINGS,
    JobContext,
    JobDriver,
    JobHandlerRegistry,
    JobQueue,
    JobsAutoConfiguration,
    JobScheduler,
    JobsSettings,
    job_handler,
)
from jobs.logs import enable_logging

from .support import JOB_TYPE, ProcessOptions, SimulatedClock


async def read_line() -> str:
    line: str = await asyncio.to_thread(sys.stdin.readline)
    return line.strip()


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def main(options: ProcessOptions) -> None:
    logger.remove()
    logger.add(sys.stderr, level="INFO", format="{level} {message}")
    enable_logging()  # the library's lines are off until an app enables them
    store_clock = SimulatedClock(rate=options.rate)
    scheduler_clock = SimulatedClock(rate=options.rate, skew_ms=options.skew_ms)
    driver = options.store.open(store_clock)

    class Reports:
        @job_handler(JOB_TYPE, cron=options.cron)
        async def run(self, payload: Any, ctx: JobContext) -> None:
            say(f"ran {ctx.id}")

    @configuration
    class Server:
        @entry(JOB_DRIVER)
        def job_driver(self) -> JobDriver:
            return driver

        @entry()
        def reports(self) -> Reports:
            return Reports()

        @entry(JOBS_SETTINGS)
        def jobs_settings(self) -> JobsSettings:
            return JobsSettings(poll_interval_ms=100, lease_ms=600_000)

        @entry(JOB_SCHEDULER)
        def job_scheduler(
            self,
            context: ApplicationContext,
            job_queue: JobQueue,
            job_handler_registry: JobHandlerRegistry,
        ) -> JobScheduler:
            return JobScheduler(
                job_queue,
                registry=job_handler_registry,
                context=context,
                clock=scheduler_clock,
                interval_ms=options.interval_ms,
                catch_up_ms=options.catch_up_ms,
                auto_startup=False,  # started on "go", at the same moment in every process
            )

    async with await ApplicationBuilder([JobsAutoConfiguration, Server]).run() as context:
        await driver.counts()  # the store is reachable and its tables exist
        say("ready")
        command = (await read_line()).split()
        if command[:1] != ["go"]:
            raise SystemExit(f"expected go, got {command}")
        start, anchor = int(command[1]), int(command[2])
        store_clock.begin(start, anchor)
        scheduler_clock.begin(start, anchor)
        context.get_value(JOB_SCHEDULER).start()
        context.get_value(JOB_RUNNER).start()
        await read_line()  # "stop", or the end of input
    say("bye")


if __name__ == "__main__":
    asyncio.run(main(ProcessOptions.from_json(sys.argv[1])))
