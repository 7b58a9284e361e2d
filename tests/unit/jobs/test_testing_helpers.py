"""jobs.testing for applications: the plugin's fixtures, run_jobs, enqueued, run_schedules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import BaseModel

from framework import ApplicationContext, configuration, entry
from jobs import (
    JOB_QUEUE,
    JOB_RUNNER,
    InProcessJobDriver,
    JobContext,
    JobHandlerRegistry,
    JobQueue,
    ManualClock,
    define_job,
    job_handler,
)
from jobs.testing import (
    RunJobsError,
    assert_enqueued,
    builder_for_tests,
    enqueued,
    run_jobs,
    run_schedules,
)

START = datetime(2026, 10, 16, 2, 59, 30, tzinfo=UTC)


class Receipt(BaseModel):
    invoice_id: int
    email: str = "a@b.c"


SEND_RECEIPT = define_job("receipt.send", Receipt, max_attempts=3)


class Mailer:
    def __init__(self) -> None:
        self.sent: list[tuple[int, int]] = []
        self.failures_left = 0
        self.nightly: list[str] = []

    @job_handler(SEND_RECEIPT)
    async def send(self, receipt: Receipt, ctx: JobContext) -> None:
        if self.failures_left:
            self.failures_left -= 1
            raise ConnectionError("smtp down")
        self.sent.append((receipt.invoice_id, ctx.attempt))

    @job_handler("invoice.close")
    async def close_invoice(self, payload: dict[str, int], ctx: JobContext) -> None:
        queue: JobQueue = self.context.get_value(JOB_QUEUE)
        await queue.enqueue(SEND_RECEIPT, {"invoice_id": payload["id"]})

    @job_handler("loop.forever")
    async def forever(self, payload: None) -> None:
        await self.context.get_value(JOB_QUEUE).enqueue("loop.forever")

    @job_handler("report.nightly", cron="0 3 * * *")
    def report(self, payload: None, ctx: JobContext) -> None:
        self.nightly.append(ctx.id)

    context: ApplicationContext


@configuration
class MailConfiguration:
    @entry()
    def mailer(self, context: ApplicationContext) -> Mailer:
        mailer = Mailer()
        mailer.context = context
        return mailer


@pytest.fixture
def jobs_configurations() -> list[type]:
    return [MailConfiguration]


@pytest.fixture
def jobs_clock() -> ManualClock:
    return ManualClock(START)


def mailer_of(context: ApplicationContext) -> Mailer:
    mailer: Mailer = context.get_value("mailer")
    return mailer


async def test_nothing_runs_until_run_jobs_which_runs_everything_due(
    jobs_context: ApplicationContext, jobs_queue: JobQueue
) -> None:
    mailer = mailer_of(jobs_context)
    first = await jobs_queue.enqueue(SEND_RECEIPT, {"invoice_id": 1})
    await jobs_queue.enqueue("invoice.close", {"id": 2})
    assert not jobs_context.get_value(JOB_RUNNER).is_running  # nothing claims behind our back
    await assert_enqueued(jobs_context, SEND_RECEIPT, {"invoice_id": 1})
    assert mailer.sent == []
    runs = await run_jobs(jobs_context)
    assert sorted(mailer.sent) == [(1, 1), (2, 1)]  # the follow-up enqueued by a handler too
    assert [run.type for run in runs].count("receipt.send") == 2
    assert runs[0].id == first
    assert all(run.ok and run.attempts == 1 for run in runs)
    assert await run_jobs(jobs_context) == []  # nothing left


async def test_a_retry_waits_for_the_clock_unless_run_jobs_advances_it(
    jobs_context: ApplicationContext, jobs_queue: JobQueue, jobs_clock: ManualClock
) -> None:
    mailer = mailer_of(jobs_context)
    mailer.failures_left = 1
    await jobs_queue.enqueue(SEND_RECEIPT, {"invoice_id": 7})
    [run] = await run_jobs(jobs_context)
    assert (run.state, run.attempts) == ("pending", 1)
    assert run.last_error is not None
    assert "smtp down" in run.last_error
    assert jobs_clock.now() == START
    [run] = await run_jobs(jobs_context, advance_clock=True)
    assert (run.state, run.attempts) == ("completed", 2)
    assert mailer.sent == [(7, 2)]
    # the default backoff's first step: 1 s, ±15 %
    assert START + timedelta(seconds=0.85) <= jobs_clock.now() <= START + timedelta(seconds=1.15)


async def test_a_job_that_keeps_failing_ends_failed_after_its_attempts(
    jobs_context: ApplicationContext, jobs_queue: JobQueue
) -> None:
    mailer_of(jobs_context).failures_left = 10
    await jobs_queue.enqueue(SEND_RECEIPT, {"invoice_id": 7})
    [run] = await run_jobs(jobs_context, advance_clock=True)
    assert (run.state, run.attempts) == ("failed", 3)
    assert [error.attempt for error in run.errors] == [1, 2, 3]
    assert all("smtp down" in error.error for error in run.errors)


async def test_a_delayed_job_runs_once_the_clock_is_advanced_to_it(
    jobs_context: ApplicationContext, jobs_queue: JobQueue, jobs_clock: ManualClock
) -> None:
    await jobs_queue.enqueue(SEND_RECEIPT, {"invoice_id": 9}, delay_ms=3_600_000)
    assert await run_jobs(jobs_context) == []
    [run] = await run_jobs(jobs_context, advance_clock=True)
    assert run.ok
    assert jobs_clock.now() == START + timedelta(hours=1)


async def test_a_job_that_enqueues_itself_forever_is_reported(
    jobs_context: ApplicationContext, jobs_queue: JobQueue
) -> None:
    await jobs_queue.enqueue("loop.forever")
    with pytest.raises(RunJobsError, match="max_runs=20"):
        await run_jobs(jobs_context, max_runs=20)


async def test_max_runs_reached_with_nothing_left_due_is_not_an_error(
    jobs_context: ApplicationContext, jobs_queue: JobQueue
) -> None:
    for invoice in (1, 2):
        await jobs_queue.enqueue(SEND_RECEIPT, {"invoice_id": invoice})
    runs = await run_jobs(jobs_context, max_runs=2)
    assert [run.ok for run in runs] == [True, True]


async def test_enqueued_decodes_payloads_into_their_models_and_filters(
    jobs_context: ApplicationContext, jobs_queue: JobQueue
) -> None:
    await jobs_queue.enqueue(SEND_RECEIPT, {"invoice_id": 1}, key="receipt:1")
    await jobs_queue.enqueue(SEND_RECEIPT, Receipt(invoice_id=2, email="x@y.z"))
    await jobs_queue.enqueue("invoice.close", {"id": 3})
    await jobs_queue.enqueue("not.handled", {"x": [1]})
    everything = await enqueued(jobs_context)
    assert [job.type for job in everything].count("receipt.send") == 2
    receipts = await enqueued(jobs_context, "receipt.send")  # by name: the handler's definition
    assert sorted((job.payload for job in receipts), key=lambda r: r.invoice_id) == [
        Receipt(invoice_id=1),
        Receipt(invoice_id=2, email="x@y.z"),
    ]
    [one] = await assert_enqueued(jobs_context, SEND_RECEIPT, {"invoice_id": 1})
    assert one.key == "receipt:1"
    await assert_enqueued(jobs_context, SEND_RECEIPT, Receipt(invoice_id=2, email="x@y.z"))
    await assert_enqueued(jobs_context, "not.handled", {"x": [1]}, count=1)
    await assert_enqueued(jobs_queue, "receipt.send", count=2)
    assert await enqueued(jobs_context, SEND_RECEIPT, key="receipt:2") == []


async def test_assert_enqueued_lists_what_waits_when_nothing_matches(
    jobs_context: ApplicationContext, jobs_queue: JobQueue
) -> None:
    await jobs_queue.enqueue(SEND_RECEIPT, {"invoice_id": 1})
    with pytest.raises(AssertionError) as info:
        await assert_enqueued(jobs_context, SEND_RECEIPT, {"invoice_id": 2})
    message = str(info.value)
    assert "expected a pending 'receipt.send' job(s) with payload {'invoice_id': 2}" in message
    assert "found 0" in message
    assert "receipt.send Receipt(invoice_id=1" in message
    with pytest.raises(AssertionError, match="found 1"):
        await assert_enqueued(jobs_context, SEND_RECEIPT, count=2)
    await run_jobs(jobs_context)
    with pytest.raises(AssertionError, match=r"\(nothing\)"):
        await assert_enqueued(jobs_context, SEND_RECEIPT)


async def test_scheduler_passes_run_when_the_test_says_on_its_clock(
    jobs_context: ApplicationContext, jobs_clock: ManualClock
) -> None:
    mailer = mailer_of(jobs_context)
    report = await run_schedules(jobs_context)
    key = "report.nightly:2026-10-16T03:00:00Z"
    assert [queued for queued, _ in report.queued] == [key]
    assert (await run_schedules(jobs_context)).dropped == [key]  # a repeat pass: dropped by key
    [waiting] = await assert_enqueued(jobs_context, "report.nightly")
    assert waiting.run_at == datetime(2026, 10, 16, 3, tzinfo=UTC)
    assert await run_jobs(jobs_context) == []  # not due before 03:00
    [run] = await run_jobs(jobs_context, advance_clock=True)
    assert run.ok
    assert run.key == key
    assert mailer.nightly == [run.id]


async def test_run_jobs_on_a_bare_queue_needs_its_registry() -> None:
    clock = ManualClock(START)
    driver = InProcessJobDriver(clock=clock)
    seen: list[object] = []
    registry = JobHandlerRegistry()
    registry.register("t", seen.append)
    queue = JobQueue(driver, registry=registry)
    await queue.enqueue("t", {"n": 1})
    [run] = await run_jobs(queue)
    assert run.ok
    assert seen == [{"n": 1}]
    with pytest.raises(ValueError, match="registry"):
        await run_jobs(JobQueue(driver))
    with pytest.raises(ValueError, match="needs a ManualClock"):
        await run_jobs(queue, advance_clock=True)
    await driver.close()


async def test_builder_for_tests_replaces_the_apps_driver_and_keeps_its_beans() -> None:
    from jobs import JOB_DRIVER, JobDriver

    @configuration
    class Durable:
        @entry(JOB_DRIVER)
        def job_driver(self) -> JobDriver:
            raise AssertionError("a testing context must not open the app's driver")

    clock = ManualClock(START)
    builder = builder_for_tests([Durable, MailConfiguration], clock=clock)
    async with await builder.run() as context:
        assert isinstance(context.get_value(JOB_DRIVER), InProcessJobDriver)
        assert isinstance(context.get_value("mailer"), Mailer)
        job_id = await context.get_value(JOB_QUEUE).enqueue("t", delay_ms=1_000)
        assert job_id is not None
        info = await context.get_value(JOB_DRIVER).get_job(job_id)
        assert info is not None
        assert info.run_at == START + timedelta(seconds=1)  # the driver reads the test's clock


def test_a_manual_clock_starts_at_a_given_datetime_and_refuses_naive_ones() -> None:
    clock = ManualClock(START)
    assert clock.now() == START
    assert clock.now_ms() == int(START.timestamp() * 1000)
    clock.set(START + timedelta(minutes=1))
    assert clock.now() == START + timedelta(minutes=1)
    with pytest.raises(ValueError, match="timezone-aware"):
        ManualClock(datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="does not go backwards"):
        clock.set(START)


async def test_builder_for_tests_takes_the_apps_builder_with_its_overrides() -> None:
    from framework import ApplicationBuilder
    from jobs import JOB_DRIVER

    custom = Mailer()
    app = ApplicationBuilder([MailConfiguration]).override("mailer", custom)
    async with await builder_for_tests(app, clock=ManualClock(START)).run() as context:
        assert context.get_value("mailer") is custom
        assert isinstance(context.get_value(JOB_DRIVER), InProcessJobDriver)
        custom.context = context
        await context.get_value(JOB_QUEUE).enqueue(SEND_RECEIPT, {"invoice_id": 5})
        [run] = await run_jobs(context)
        assert run.ok
        assert custom.sent == [(5, 1)]


async def test_run_jobs_refuses_a_context_whose_runner_is_running() -> None:
    from framework import ApplicationBuilder
    from jobs import JobsAutoConfiguration

    async with await ApplicationBuilder([JobsAutoConfiguration, MailConfiguration]).run() as ctx:
        ctx.get_value(JOB_RUNNER).start()
        with pytest.raises(ValueError, match="builder_for_tests"):
            await run_jobs(ctx)
