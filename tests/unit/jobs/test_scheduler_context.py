"""JobScheduler in the container: the default bean, schedules from handlers and beans, errors."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from framework import (
    ApplicationBuilder,
    ApplicationContext,
    BeanCreationError,
    LifecycleError,
    configuration,
    entry,
)
from jobs import (
    JOB_DRIVER,
    JOB_QUEUE,
    JOB_RUNNER,
    JOB_SCHEDULER,
    InProcessJobDriver,
    JobContext,
    JobHandlerRegistry,
    JobQueue,
    JobsAutoConfiguration,
    JobScheduler,
    JobsSettings,
    ManualClock,
    Schedule,
    ScheduleError,
    job_handler,
)
from jobs.schedule import occurrence_iso
from tests.support import wait_until

from .conftest import AppFactory


class NightlyReport:
    def __init__(self) -> None:
        self.runs: list[tuple[str, Any]] = []

    @job_handler("report.nightly", cron="0 3 * * *")
    async def build(self, payload: Any, ctx: JobContext) -> None:
        self.runs.append((ctx.id, payload))


async def wait_for_pending(context: ApplicationContext, count: int) -> None:
    driver = context.get_value(JOB_DRIVER)

    async def stored() -> bool:
        return (await driver.counts())["pending"] == count

    await wait_until(stored, message=f"{count} pending jobs")


def next_utc(hour: int, after_ms: int) -> str:
    occurrence = Schedule(cron=f"0 {hour} * * *", job="t").next_after(after_ms)
    assert occurrence is not None
    return occurrence_iso(occurrence)


async def test_the_default_scheduler_is_a_running_bean(make_app: AppFactory) -> None:
    context = await make_app()
    scheduler = context.get_value(JOB_SCHEDULER)
    assert isinstance(scheduler, JobScheduler)
    assert scheduler.is_running
    assert (scheduler.phase, scheduler.auto_startup) == (5, True)
    assert scheduler.interval_ms == JobsSettings().schedule_interval_ms


async def test_a_cron_handler_is_queued_at_start(make_app: AppFactory) -> None:
    started = int(datetime.now(UTC).timestamp() * 1000)
    context = await make_app(report=NightlyReport())
    await wait_for_pending(context, 1)
    key = f"report.nightly:{next_utc(3, started)}"
    assert await context.get_value(JOB_QUEUE).enqueue("report.nightly", key=key) is None


async def test_schedule_beans_are_found(make_app: AppFactory) -> None:
    started = int(datetime.now(UTC).timestamp() * 1000)
    single = Schedule(cron="0 4 * * *", job="export.daily", payload={"format": "csv"})
    several = [
        Schedule(cron="0 5 * * *", job="usage.report", payload={"region": region}, name=name)
        for region, name in (("eu", "usage.eu"), ("us", "usage.us"))
    ]
    context = await make_app(one=single, many=several, not_schedules=[1, 2])
    scheduler = context.get_value(JOB_SCHEDULER)
    assert [s.key_prefix for s in scheduler.schedules] == ["export.daily", "usage.eu", "usage.us"]
    await wait_for_pending(context, 3)
    queue = context.get_value(JOB_QUEUE)
    for name, hour in (("export.daily", 4), ("usage.eu", 5), ("usage.us", 5)):
        key = f"{name}:{next_utc(hour, started)}"
        assert await queue.enqueue("t", key=key) is None, key


async def test_a_bad_schedule_bean_fails_run_naming_it() -> None:
    @configuration
    class App:
        @entry()
        def nightly(self) -> Schedule:
            return Schedule(cron="0 3 * * *", job="report", timezone="Nowhere/None")

    with pytest.raises(BeanCreationError, match=r"'nightly'.*schedule 'report'") as raised:
        await ApplicationBuilder([JobsAutoConfiguration, App]).run()
    assert isinstance(raised.value.__cause__, ScheduleError)


async def test_duplicate_schedule_names_fail_run(make_app: AppFactory) -> None:
    clash = Schedule(cron="0 4 * * *", job="report.nightly")
    with pytest.raises(LifecycleError, match="job_scheduler") as raised:
        await make_app(report=NightlyReport(), clash=clash)
    assert isinstance(raised.value.__cause__, ScheduleError)
    assert "two schedules are named 'report.nightly'" in str(raised.value)


async def test_a_bad_payload_fails_run(make_app: AppFactory) -> None:
    schedule = Schedule(cron="0 4 * * *", job="t", payload={"when": datetime.now(UTC)})
    with pytest.raises(LifecycleError, match=r"schedule 't'.*payload\[\"when\"\]"):
        await make_app(schedule=schedule)


async def test_scheduled_jobs_run_once_per_occurrence_end_to_end() -> None:
    clock = ManualClock(int(datetime(2026, 10, 16, 2, 59, 30, tzinfo=UTC).timestamp() * 1000))
    report = NightlyReport()

    @configuration
    class App:
        @entry(JOB_DRIVER)
        def job_driver(self) -> InProcessJobDriver:
            return InProcessJobDriver(clock=clock, retain_completed_ms=0)

        @entry()
        def nightly_report(self) -> NightlyReport:
            return report

        @entry(JOB_SCHEDULER)
        def job_scheduler(
            self,
            context: ApplicationContext,
            job_queue: JobQueue,
            job_handler_registry: JobHandlerRegistry,
        ) -> JobScheduler:
            return JobScheduler(
                job_queue, registry=job_handler_registry, context=context, clock=clock
            )

        @entry()
        def jobs_settings(self) -> JobsSettings:
            return JobsSettings(auto_start=True)

    async with await ApplicationBuilder([JobsAutoConfiguration, App]).run() as context:
        scheduler = context.get_value(JOB_SCHEDULER)
        assert context.get_value(JOB_RUNNER).is_running
        await wait_until(lambda: len(scheduler.schedules) == 1)
        assert report.runs == []
        clock.advance(30_000)  # 03:00: due
        await wait_until(lambda: len(report.runs) == 1)
        assert report.runs[0][1] is None
        for _ in range(3):  # other servers (and this one) ask again: dropped by the key
            again = await scheduler.run_pass()
            assert again.dropped[0] == "report.nightly:2026-10-16T03:00:00Z"
        clock.advance(86_400_000)  # the next night
        await wait_until(lambda: len(report.runs) == 2)
        assert len({job_id for job_id, _ in report.runs}) == 2
    assert not scheduler.is_running
