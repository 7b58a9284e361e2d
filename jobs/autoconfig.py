"""JobsAutoConfiguration: the default beans of the jobs plugin (each replaceable by name)."""

from __future__ import annotations

from framework import ApplicationContext, auto_configuration, entry

from .errors import JobsError
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
        self,
        outbox_store: OutboxStore,
        job_queue: JobQueue,
        jobs_settings: JobsSettings,
        job_driver: JobDriver,
    ) -> OutboxRelay:
        check_outbox_driver(job_driver, jobs_settings)
        return OutboxRelay(
            outbox_store,
            JobOutboxPublisher(job_queue),
            poll_interval_ms=jobs_settings.poll_interval_ms,
            retain_published_ms=jobs_settings.retain_published_ms,
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


def check_outbox_driver(job_driver: JobDriver, settings: JobsSettings) -> None:
    """Refuse an outbox whose jobs would be published into a driver that keeps them in memory.

    A driver says it is not durable with a class attribute ``durable = False``
    (``InProcessJobDriver``); ``JobsSettings(allow_volatile_outbox=True)`` allows it (tests).
    """
    if getattr(job_driver, "durable", True) or settings.allow_volatile_outbox:
        return
    raise JobsError(
        f"an outbox store is declared (bean {OUTBOX_STORE.name!r}), but JOB_DRIVER (bean "
        f"{JOB_DRIVER.name!r}) is {type(job_driver).__name__}, which keeps jobs in memory: "
        "every job the outbox relay publishes would be lost when the process exits, its entry "
        "already marked published. Declare a durable JOB_DRIVER in your configuration "
        "(@entry(JOB_DRIVER) returning a SQLAlchemyJobStore or a RedisJobDriver), or, in "
        "tests, allow it with JobsSettings(allow_volatile_outbox=True)"
    )
