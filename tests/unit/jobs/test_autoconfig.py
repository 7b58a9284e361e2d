from __future__ import annotations

import asyncio
from typing import Any

import pytest

from framework.errors import BeanCreationError
from jobs import (
    JOB_DRIVER,
    JOB_HANDLER_REGISTRY,
    JOB_QUEUE,
    JOB_RUNNER,
    JOBS_SETTINGS,
    OUTBOX_RELAY,
    InProcessJobDriver,
    JobHandlerRegistry,
    JobQueue,
    JobRunner,
    JobsSettings,
    OutboxRelay,
    job_handler,
)
from jobs.settings import DEFAULT_RETAIN_PUBLISHED_MS
from tests.support import wait_until

from .conftest import AppFactory


async def test_defaults_are_provided_under_their_tokens(make_app: AppFactory) -> None:
    context = await make_app()
    assert isinstance(context.get_value(JOBS_SETTINGS), JobsSettings)
    assert isinstance(context.get_value(JOB_DRIVER), InProcessJobDriver)
    assert isinstance(context.get_value(JOB_QUEUE), JobQueue)
    assert isinstance(context.get_value(JOB_HANDLER_REGISTRY), JobHandlerRegistry)
    assert isinstance(context.get_value(JOB_RUNNER), JobRunner)
    assert OUTBOX_RELAY not in context  # no outbox store bean, no relay
    assert not context.get_value(JOB_RUNNER).is_running  # started explicitly by default


async def test_auto_start_starts_the_runner_at_refresh(make_app: AppFactory) -> None:
    ran: list[Any] = []

    class Worker:
        @job_handler("t")
        async def handle(self, payload: Any) -> None:
            ran.append(payload)

    context = await make_app(settings=JobsSettings(auto_start=True), worker=Worker())
    assert context.get_value(JOB_RUNNER).is_running
    await context.get_value(JOB_QUEUE).enqueue("t", 1)
    await wait_until(lambda: ran == [1])


async def test_the_settings_bean_reaches_the_runner(make_app: AppFactory) -> None:
    settings = JobsSettings(concurrency=4, lease_ms=9_000, heartbeat_ms=1_000)
    context = await make_app(settings=settings)
    runner = context.get_value(JOB_RUNNER)
    assert runner.settings.concurrency == 4
    assert (runner.lease_ms, runner.heartbeat_ms) == (9_000, 1_000)


async def test_closing_the_context_drains_the_runner_before_the_driver(
    make_app: AppFactory,
) -> None:
    order: list[str] = []

    class Driver(InProcessJobDriver):
        async def close(self) -> None:
            order.append("driver closed")
            await super().close()

    class Worker:
        @job_handler("t")
        async def handle(self, payload: Any) -> None:
            order.append("job started")
            await asyncio.sleep(0.05)
            order.append("job finished")

    driver = Driver()
    context = await make_app(driver=driver, worker=Worker())
    job_id = await context.get_value(JOB_QUEUE).enqueue("t")
    assert job_id is not None
    context.get_value(JOB_RUNNER).start()
    await wait_until(lambda: order == ["job started"])
    await context.close()
    assert order == ["job started", "job finished", "driver closed"]
    info = await driver.get_job(job_id)
    assert info is not None
    assert info.state == "completed"


class _Outbox:
    """Enough of an outbox store to be declared (nothing here calls it)."""

    async def close(self) -> None:
        pass


class _DurableDriver(InProcessJobDriver):
    durable = True  # as a database-backed driver is


async def test_an_outbox_with_the_in_memory_default_driver_fails_run_naming_job_driver(
    make_app: AppFactory,
) -> None:
    with pytest.raises(BeanCreationError) as raised:
        await make_app(outbox_store=_Outbox())
    message = str(raised.value)
    assert "creating bean 'outbox_relay' failed" in message
    assert "JOB_DRIVER (bean 'job_driver') is InProcessJobDriver, which keeps jobs in memory" in (
        message
    )
    assert "JobsSettings(allow_volatile_outbox=True)" in message


async def test_tests_may_allow_an_outbox_on_the_in_memory_driver(make_app: AppFactory) -> None:
    context = await make_app(
        settings=JobsSettings(allow_volatile_outbox=True), outbox_store=_Outbox()
    )
    assert isinstance(context.get_value(OUTBOX_RELAY), OutboxRelay)


@pytest.mark.parametrize("retain_ms", [DEFAULT_RETAIN_PUBLISHED_MS, 60_000, None])
async def test_retain_published_ms_reaches_the_relay(
    make_app: AppFactory, retain_ms: int | None
) -> None:
    settings = (
        JobsSettings()
        if retain_ms == DEFAULT_RETAIN_PUBLISHED_MS
        else JobsSettings(retain_published_ms=retain_ms)
    )
    context = await make_app(settings=settings, driver=_DurableDriver(), outbox_store=_Outbox())
    assert context.get_value(OUTBOX_RELAY).retain_published_ms == retain_ms


def test_published_entries_are_kept_seven_days_by_default() -> None:
    assert JobsSettings().retain_published_ms == DEFAULT_RETAIN_PUBLISHED_MS == 7 * 86_400_000
    with pytest.raises(ValueError, match="retain_published_ms must not be negative"):
        JobsSettings(retain_published_ms=-1)
