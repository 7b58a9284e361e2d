from __future__ import annotations

import asyncio
from typing import Any

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
    job_handler,
)
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
