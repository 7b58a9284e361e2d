"""BackgroundService: one lifecycle for the runner, the relay, the scheduler (and presence)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from framework import ApplicationBuilder, configuration, entry
from jobs import (
    JOB_DRIVER,
    JOB_RUNNER,
    OUTBOX_RELAY,
    OUTBOX_STORE,
    InProcessJobDriver,
    JobHandlerRegistry,
    JobOutboxPublisher,
    JobQueue,
    JobRunner,
    JobsAutoConfiguration,
    JobScheduler,
    JobsError,
    OutboxRelay,
    OutboxStore,
    Schedule,
)
from jobs.service import BackgroundService, ServiceState
from jobs.spi import OutboxEntry


class QuietOutbox:
    """An outbox store double with nothing to relay."""

    def __init__(self) -> None:
        self.closed = False

    async def claim(self, limit: int, lease_ms: int) -> list[OutboxEntry]:
        return []

    async def wait_for_entries(self, timeout_ms: int) -> None:
        await asyncio.sleep(timeout_ms / 1000)

    async def prune(self, older_than_ms: int) -> int:
        return 0

    async def close(self) -> None:
        self.closed = True


def runner() -> JobRunner:
    return JobRunner(InProcessJobDriver(), JobHandlerRegistry())


def relay() -> OutboxRelay:
    store: OutboxStore = QuietOutbox()  # type: ignore[assignment]
    return OutboxRelay(store, JobOutboxPublisher(JobQueue(InProcessJobDriver())))


def scheduler() -> JobScheduler:
    schedule = Schedule(cron="0 3 * * *", job="report.nightly")
    return JobScheduler(JobQueue(InProcessJobDriver()), schedules=[schedule])


SERVICES: dict[str, Callable[[], BackgroundService]] = {
    "job runner": runner,
    "outbox relay": relay,
    "job scheduler": scheduler,
}


@pytest.mark.parametrize("name", sorted(SERVICES))
async def test_a_service_goes_created_running_stopping_closed(name: str) -> None:
    service = SERVICES[name]()
    assert service.service == name
    assert (service.state, service.is_running) == (ServiceState.CREATED, False)
    service.start()
    service.start()  # idempotent
    assert (service.state, service.is_running) == (ServiceState.RUNNING, True)
    service.stop()
    service.stop()
    assert (service.state, service.is_running) == (ServiceState.STOPPING, False)
    service.start()  # a stopped service starts again
    assert service.is_running
    await service.close()
    await service.close()  # idempotent
    assert (service.state, service.is_running) == (ServiceState.CLOSED, False)
    assert not service.health().healthy


@pytest.mark.parametrize("name", sorted(SERVICES))
async def test_starting_a_closed_service_is_a_jobs_error_naming_it(name: str) -> None:
    service = SERVICES[name]()
    await service.close()  # never started: closing is still fine
    with pytest.raises(JobsError, match=f"the {name} is closed; build a new one"):
        service.start()


async def test_the_runner_closes_before_the_relay_and_the_driver_it_did_not_make() -> None:
    """The order is declared on the runner's entry, not implied by entry parameters."""
    closed: list[str] = []

    class Driver(InProcessJobDriver):
        async def close(self) -> None:
            closed.append("driver")
            await super().close()

    class Relay(OutboxRelay):
        async def close(self) -> None:
            closed.append("relay")
            await super().close()

    class Runner(JobRunner):
        async def close(self, drain_timeout_ms: int | None = None) -> None:
            closed.append("runner")
            await super().close(drain_timeout_ms)

    @configuration
    class App:
        @entry(JOB_DRIVER)
        def job_driver(self) -> InProcessJobDriver:
            return Driver()

        @entry(OUTBOX_STORE)
        def outbox_store(self) -> OutboxStore:
            return QuietOutbox()  # type: ignore[return-value]

        @entry(JOB_RUNNER)
        def job_runner(self, job_driver: Driver) -> JobRunner:
            return Runner(job_driver, JobHandlerRegistry())

        @entry(OUTBOX_RELAY)
        def outbox_relay(
            self, outbox_store: OutboxStore, job_driver: Driver, job_runner: JobRunner
        ) -> OutboxRelay:  # made after the runner: reverse creation order would close it first
            return Relay(outbox_store, JobOutboxPublisher(JobQueue(job_driver)))

    context = await ApplicationBuilder([JobsAutoConfiguration, App]).run()
    assert context.bean_names.index("job_runner") < context.bean_names.index("outbox_relay")
    await context.close()
    assert closed == ["runner", "relay", "driver"]
