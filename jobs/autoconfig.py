"""JobsAutoConfiguration: the default beans of the jobs plugin (each replaceable by name)."""

from __future__ import annotations

from framework import ApplicationContext, auto_configuration, entry

from .handlers import JobHandlerRegistry
from .inprocess import InProcessJobDriver
from .outbox_relay import JobOutboxPublisher, OutboxRelay
from .queue import JobQueue
from .runner import JobRunner
from .scheduler import JobScheduler
from .settings import JobsSettings
from .spi.driver import JobDriver
from .spi.outbox import OutboxStore
from .tokens import (
    JOB_DRIVER,
    JOB_HANDLER_REGISTRY,
    JOB_QUEUE,
    JOB_RUNNER,
    JOB_SCHEDULER,
    JOBS_SETTINGS,
    OUTBOX_RELAY,
    OUTBOX_STORE,
)


@auto_configuration
class JobsAutoConfiguration:
    """Defaults: settings, the in-process driver, queue, registry, scheduler, runner, and the
    outbox relay when an ``outbox_store`` bean exists.

    The order of shutdown is declared on the runner: it is closed (drained) before the relay
    and the driver (``closes_before``), whatever entry makes either.
    """

    @entry(JOBS_SETTINGS)
    def jobs_settings(self) -> JobsSettings:
        return JobsSettings()

    @entry(JOB_DRIVER)
    def job_driver(self, jobs_settings: JobsSettings) -> JobDriver:
        return InProcessJobDriver(
            retain_completed_ms=jobs_settings.retain_completed_ms,
            retain_failed_ms=jobs_settings.retain_failed_ms,
        )

    @entry(JOB_HANDLER_REGISTRY)
    def job_handler_registry(self, context: ApplicationContext) -> JobHandlerRegistry:
        return JobHandlerRegistry(context)

    @entry(JOB_QUEUE)
    def job_queue(
        self,
        job_driver: JobDriver,
        jobs_settings: JobsSettings,
        job_handler_registry: JobHandlerRegistry,
    ) -> JobQueue:
        return JobQueue(job_driver, settings=jobs_settings, registry=job_handler_registry)

    @entry(JOB_SCHEDULER)
    def job_scheduler(
        self,
        context: ApplicationContext,
        job_queue: JobQueue,
        job_handler_registry: JobHandlerRegistry,
        jobs_settings: JobsSettings,
    ) -> JobScheduler:
        return JobScheduler(
            job_queue,
            registry=job_handler_registry,
            context=context,
            interval_ms=jobs_settings.schedule_interval_ms,
        )

    @entry(OUTBOX_RELAY, when_bean=OUTBOX_STORE)
    def outbox_relay(
        self, outbox_store: OutboxStore, job_queue: JobQueue, jobs_settings: JobsSettings
    ) -> OutboxRelay:
        return OutboxRelay(
            outbox_store,
            JobOutboxPublisher(job_queue),
            poll_interval_ms=jobs_settings.poll_interval_ms,
            auto_startup=jobs_settings.auto_start,
        )

    @entry(JOB_RUNNER, closes_before=(OUTBOX_RELAY, JOB_DRIVER))
    def job_runner(
        self,
        job_driver: JobDriver,
        job_handler_registry: JobHandlerRegistry,
        jobs_settings: JobsSettings,
    ) -> JobRunner:
        return JobRunner(job_driver, job_handler_registry, jobs_settings)
