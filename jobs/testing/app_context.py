"""A context for an application's tests: the in-process driver on a ManualClock, nothing running.

``builder_for_tests(configurations, clock=...)`` is the application's own builder with a few beans
replaced on purpose (``@configuration(overrides=True)``):

* ``job_driver``: an ``InProcessJobDriver`` reading the test's ManualClock
  (backoffs and delays wait for the clock, not for the wall);
* ``job_runner`` and ``outbox_relay``: the application's settings with ``auto_start`` off, so
  nothing claims jobs behind the test's back: ``run_jobs`` runs them when the test says so;
* ``job_scheduler``: on the ManualClock and not auto-started: ``run_schedules`` runs one pass.

Everything else (the application's beans, its settings, an outbox store on a real database)
is the application's own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from framework import ApplicationBuilder, ApplicationContext, Token, configuration, entry

from ..autoconfig import JobsAutoConfiguration
from ..clock import ManualClock
from ..handlers import JobHandlerRegistry
from ..inprocess import InProcessJobDriver
from ..outbox_relay import JobOutboxPublisher, OutboxRelay
from ..queue import JobQueue
from ..runner import JobRunner
from ..scheduler import JobScheduler, PassReport
from ..settings import JobsSettings
from ..spi import JobDriver, OutboxStore
from ..tokens import (
    JOB_DRIVER,
    JOB_RUNNER,
    JOB_SCHEDULER,
    OUTBOX_RELAY,
    OUTBOX_STORE,
)

TEST_CLOCK: Token[ManualClock] = Token("jobs_test_clock")
"""The ManualClock of a testing context (``builder_for_tests``)."""


@configuration(overrides=True)
class JobsTestConfiguration:
    """The beans a test replaces; see the module docstring."""

    @entry(TEST_CLOCK)
    def jobs_test_clock(self) -> ManualClock:
        return ManualClock()

    @entry(JOB_DRIVER)
    def job_driver(self, jobs_test_clock: ManualClock, jobs_settings: JobsSettings) -> JobDriver:
        return InProcessJobDriver(
            clock=jobs_test_clock,
            retain_completed_ms=jobs_settings.retain_completed_ms,
            retain_failed_ms=jobs_settings.retain_failed_ms,
        )

    @entry(JOB_SCHEDULER)
    def job_scheduler(
        self,
        context: ApplicationContext,
        job_queue: JobQueue,
        job_handler_registry: JobHandlerRegistry,
        jobs_settings: JobsSettings,
        jobs_test_clock: ManualClock,
    ) -> JobScheduler:
        return JobScheduler(
            job_queue,
            registry=job_handler_registry,
            context=context,
            clock=jobs_test_clock,
            interval_ms=jobs_settings.schedule_interval_ms,
            auto_startup=False,
        )

    @entry(OUTBOX_RELAY, when_bean=OUTBOX_STORE)
    def outbox_relay(
        self, outbox_store: OutboxStore, job_queue: JobQueue, jobs_settings: JobsSettings
    ) -> OutboxRelay:
        return OutboxRelay(
            outbox_store,
            JobOutboxPublisher(job_queue),
            poll_interval_ms=jobs_settings.poll_interval_ms,
            retain_published_ms=jobs_settings.retain_published_ms,
            auto_startup=False,
        )

    @entry(JOB_RUNNER)
    def job_runner(
        self,
        job_driver: JobDriver,
        job_handler_registry: JobHandlerRegistry,
        jobs_settings: JobsSettings,
    ) -> JobRunner:
        settings = dataclasses.replace(jobs_settings, auto_start=False)
        return JobRunner(job_driver, job_handler_registry, settings)


def builder_for_tests(
    app: Iterable[type] | ApplicationBuilder, *, clock: ManualClock | None = None
) -> ApplicationBuilder:
    """The application's builder (or its configurations) made ready for a test;
    JobsAutoConfiguration is added when absent, and the application's own overrides stay.

    >>> async with await builder_for_tests([AppConfiguration], clock=clock).run() as context:
    ...     await run_jobs(context)
    """
    base = app if isinstance(app, ApplicationBuilder) else ApplicationBuilder(list(app))
    builder = base.including(JobsAutoConfiguration).override(JobsTestConfiguration)
    return builder.override(TEST_CLOCK, clock) if clock is not None else builder


async def run_schedules(context: ApplicationContext) -> PassReport:
    """One scheduler pass at the context's clock: queues each schedule's due occurrences."""
    return await context.get_value(JOB_SCHEDULER).run_pass()
