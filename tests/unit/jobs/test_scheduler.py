"""JobScheduler on the in-process driver with a ManualClock: what each pass enqueues."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest

from jobs import (
    InProcessJobDriver,
    JobQueue,
    JobScheduler,
    ManualClock,
    Schedule,
    ScheduleError,
    StoreUnavailableError,
)
from jobs.scheduler import DEFAULT_CATCH_UP_MS, KEY_MARGIN_MS
from jobs.spi import JobRequest
from tests.support import captured_logs, wait_until


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


NIGHTLY = Schedule(cron="0 3 * * *", job="report.nightly")
EVERY_MINUTE = Schedule(cron="* * * * *", job="tick")


class RecordingDriver(InProcessJobDriver):
    """Keeps every request it is given; fails the first ``failures`` enqueues; may stall."""

    def __init__(self, clock: ManualClock, **options: int) -> None:
        self.failures = options.pop("failures", 0)
        self.stall_ms = options.pop("stall_ms", 0)
        super().__init__(clock=clock, **options)
        self.requests: list[JobRequest] = []
        self.manual_clock = clock

    async def enqueue(self, job: JobRequest) -> str | None:
        self.requests.append(job)
        if self.failures:
            self.failures -= 1
            raise StoreUnavailableError("connection refused")
        if self.stall_ms:
            self.manual_clock.advance(self.stall_ms)  # a slow store: time passes during this call
            self.stall_ms = 0
        return await super().enqueue(job)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(ms("2026-10-16T02:59:30Z"))


@pytest.fixture
def driver(clock: ManualClock) -> RecordingDriver:
    return RecordingDriver(clock)


def scheduler(
    driver: InProcessJobDriver,
    clock: ManualClock,
    *schedules: Schedule,
    interval_ms: int | None = None,
    catch_up_ms: int = DEFAULT_CATCH_UP_MS,
    enqueue_timeout_ms: int = 30_000,
) -> JobScheduler:
    return JobScheduler(
        JobQueue(driver),
        schedules=schedules,
        clock=clock,
        interval_ms=interval_ms,
        catch_up_ms=catch_up_ms,
        enqueue_timeout_ms=enqueue_timeout_ms,
    )


async def test_a_pass_queues_the_next_occurrence_keyed_and_kept(
    driver: RecordingDriver, clock: ManualClock
) -> None:
    report = await scheduler(driver, clock, NIGHTLY).run_pass()
    assert [key for key, _ in report.queued] == ["report.nightly:2026-10-16T03:00:00Z"]
    (request,) = driver.requests
    occurrence = ms("2026-10-16T03:00:00Z")
    assert (request.type, request.run_at_ms, request.key) == (
        "report.nightly",
        occurrence,
        "report.nightly:2026-10-16T03:00:00Z",
    )
    assert request.keep_until_ms == occurrence + DEFAULT_CATCH_UP_MS + KEY_MARGIN_MS
    assert request.payload == "null"
    info = await driver.get_job(report.queued[0][1])
    assert info is not None
    assert (info.state, info.key) == ("pending", "report.nightly:2026-10-16T03:00:00Z")
    assert int(info.run_at.timestamp() * 1000) == occurrence


async def test_five_schedulers_asking_at_once_store_one_job(
    driver: RecordingDriver, clock: ManualClock
) -> None:
    schedulers = [scheduler(driver, clock, NIGHTLY) for _ in range(5)]
    reports = await asyncio.gather(*(s.run_pass() for s in schedulers))
    assert sum(len(r.queued) for r in reports) == 1
    assert sum(len(r.dropped) for r in reports) == 4
    assert await driver.counts() == {
        "pending": 1,
        "active": 0,
        "completed": 0,
        "failed": 0,
        "cancelled": 0,
    }


async def test_a_repeat_within_the_catch_up_window_is_dropped_even_with_no_retention(
    clock: ManualClock,
) -> None:
    driver = RecordingDriver(clock, retain_completed_ms=0)
    await scheduler(driver, clock, NIGHTLY).run_pass()
    clock.advance(30_000)
    (job,) = await driver.claim(1, 30_000, ["report.nightly"])
    assert await driver.complete(job.id, job.lease_token)
    clock.advance(59_000)  # a slow server asks 59 s after the occurrence: still in the window
    report = await scheduler(driver, clock, NIGHTLY).run_pass()
    assert report.dropped == ["report.nightly:2026-10-16T03:00:00Z"]
    assert [key for key, _ in report.queued] == ["report.nightly:2026-10-17T03:00:00Z"]
    assert await driver.get_job(job.id) is not None  # kept by keep_until, not retention


async def test_an_occurrence_past_the_catch_up_window_is_not_replayed(clock: ManualClock) -> None:
    driver = RecordingDriver(clock)
    clock.set(datetime.fromisoformat("2026-10-16T03:05:30+00:00"))  # every server was down
    report = await scheduler(driver, clock, EVERY_MINUTE, NIGHTLY).run_pass()
    assert [key for key, _ in report.queued] == [
        "tick:2026-10-16T03:05:00Z",  # the latest missed one, once: caught up
        "tick:2026-10-16T03:06:00Z",
        "report.nightly:2026-10-17T03:00:00Z",  # 03:00 today is not replayed
    ]


async def test_every_occurrence_in_a_wider_catch_up_window_is_queued_once(
    clock: ManualClock,
) -> None:
    driver = RecordingDriver(clock)
    clock.set(datetime.fromisoformat("2026-10-16T03:05:30+00:00"))
    wide = scheduler(driver, clock, EVERY_MINUTE, catch_up_ms=150_000)
    report = await wide.run_pass()
    # A first pass catches up the latest occurrence only: no backlog after a (re)start.
    assert [key for key, _ in report.queued] == [
        "tick:2026-10-16T03:05:00Z",
        "tick:2026-10-16T03:06:00Z",
    ]
    clock.set(datetime.fromisoformat("2026-10-16T03:08:30+00:00"))  # the next pass came late
    report = await wide.run_pass()
    assert [key for key, _ in report.queued] == [
        "tick:2026-10-16T03:07:00Z",
        "tick:2026-10-16T03:08:00Z",
        "tick:2026-10-16T03:09:00Z",
    ]
    assert report.dropped == ["tick:2026-10-16T03:06:00Z"]
    report = await wide.run_pass()
    assert (report.queued, len(report.dropped)) == ([], 4)


async def test_the_catch_up_check_reads_the_clock_right_before_each_enqueue(
    clock: ManualClock,
) -> None:
    driver = RecordingDriver(clock, stall_ms=90_000)
    clock.set(datetime.fromisoformat("2026-10-16T03:00:10+00:00"))
    report = await scheduler(driver, clock, EVERY_MINUTE, NIGHTLY).run_pass()
    # The first enqueue took 90 s: by then 03:00 is too old for the nightly schedule.
    assert [key for key, _ in report.queued] == [
        "tick:2026-10-16T03:00:00Z",
        "tick:2026-10-16T03:01:00Z",
        "report.nightly:2026-10-17T03:00:00Z",
    ]
    assert report.late == ["report.nightly:2026-10-16T03:00:00Z"]


async def test_a_schedule_more_frequent_than_the_pass_loses_nothing(
    driver: RecordingDriver, clock: ManualClock
) -> None:
    every_ten_seconds = Schedule(cron="*/10 * * * * *", job="t")
    first = scheduler(driver, clock, every_ten_seconds, interval_ms=30_000, catch_up_ms=5_000)
    report = await first.run_pass()
    assert [key for key, _ in report.queued] == [
        "t:2026-10-16T02:59:30Z",
        "t:2026-10-16T02:59:40Z",
        "t:2026-10-16T02:59:50Z",
        "t:2026-10-16T03:00:00Z",
    ]
    clock.advance(30_500)  # the next pass comes a little late
    report = await first.run_pass()
    assert report.dropped == ["t:2026-10-16T03:00:00Z"]
    assert [key for key, _ in report.queued] == [
        "t:2026-10-16T03:00:10Z",
        "t:2026-10-16T03:00:20Z",
        "t:2026-10-16T03:00:30Z",
    ]


async def test_dst_with_an_injected_clock() -> None:
    berlin = Schedule(cron="30 2 * * *", job="t", timezone="Europe/Berlin")
    clock = ManualClock(ms("2026-03-01T00:00:00Z"))
    driver = RecordingDriver(clock)
    clock.set(datetime.fromisoformat("2026-03-29T01:59:30+01:00"))  # 30 s before the jump
    report = await scheduler(driver, clock, berlin).run_pass()
    assert [key for key, _ in report.queued] == ["t:2026-03-29T01:00:00Z"]  # 03:00 CEST
    clock.set(datetime.fromisoformat("2026-10-25T02:29:30+02:00"))  # before the first 02:30
    report = await scheduler(driver, clock, berlin).run_pass()
    assert [key for key, _ in report.queued] == ["t:2026-10-25T00:30:00Z"]
    clock.set(datetime.fromisoformat("2026-10-25T02:29:30+01:00"))  # before the second 02:30
    report = await scheduler(driver, clock, berlin).run_pass()
    assert [key for key, _ in report.queued] == ["t:2026-10-26T01:30:00Z"]  # not again today


async def test_schedules_are_checked_at_start(driver: RecordingDriver, clock: ManualClock) -> None:
    twice = scheduler(driver, clock, NIGHTLY, Schedule(cron="0 4 * * *", job="report.nightly"))
    with pytest.raises(ScheduleError, match=r"two schedules are named 'report.nightly'"):
        twice.start()
    assert not twice.is_running
    bad_payload = Schedule(cron="0 3 * * *", job="t", payload={"at": {1, 2}})
    with pytest.raises(ScheduleError, match=r"'t'.*payload"):
        scheduler(driver, clock, bad_payload).start()
    named = Schedule(cron="0 4 * * *", job="report.nightly", name="report.nightly.late")
    scheduler(driver, clock, NIGHTLY, named).start()


async def test_options_are_checked(driver: RecordingDriver, clock: ManualClock) -> None:
    with pytest.raises(ValueError, match="interval_ms"):
        scheduler(driver, clock, interval_ms=0)
    with pytest.raises(ValueError, match="catch_up_ms"):
        scheduler(driver, clock, catch_up_ms=-1)
    with pytest.raises(ValueError, match="enqueue_timeout_ms"):
        scheduler(driver, clock, enqueue_timeout_ms=3_600_000)


async def test_a_failing_store_is_logged_and_retried(clock: ManualClock) -> None:
    driver = RecordingDriver(clock, failures=2)
    running = scheduler(driver, clock, NIGHTLY, interval_ms=10)  # retries are at most 10 ms

    async def stored() -> bool:
        return (await driver.counts())["pending"] == 1

    with captured_logs("INFO") as logs:
        running.start()
        await wait_until(stored)
    assert [request.key for request in driver.requests[:3]] == [
        "report.nightly:2026-10-16T03:00:00Z"
    ] * 3
    said = [(log["level"], log["message"]) for log in logs if "report.nightly:" in log["message"]]
    assert said[:3] == [
        (
            "ERROR",
            "queuing scheduled jobs failed: StoreUnavailableError: connection refused; "
            "report.nightly:2026-10-16T03:00:00Z is left to the next pass",
        ),
        (
            "ERROR",
            "queuing scheduled jobs failed (2 in a row): StoreUnavailableError: connection "
            "refused; report.nightly:2026-10-16T03:00:00Z is left to the next pass",
        ),
        (
            "INFO",
            "schedule report.nightly: queued report.nightly:2026-10-16T03:00:00Z as job "
            + driver.requests[2].id,
        ),
    ]
    assert any(
        log["message"].startswith("queuing scheduled jobs works again after 2 failures")
        for log in logs
    )
    assert running.is_running
    await running.close()
    assert not running.is_running


async def test_the_retry_comes_sooner_than_the_interval(clock: ManualClock) -> None:
    driver = RecordingDriver(clock, failures=1)
    running = scheduler(driver, clock, NIGHTLY, interval_ms=60_000)
    running.start()
    await wait_until(lambda: len(driver.requests) == 2, timeout=3.0)  # 1 s later, not 60 s
    await running.close()


async def test_a_hanging_store_is_cut_off_and_ends_the_pass(clock: ManualClock) -> None:
    class HangingDriver(RecordingDriver):
        hang = True

        async def enqueue(self, job: JobRequest) -> str | None:
            if self.hang:
                self.requests.append(job)
                await asyncio.Event().wait()
            return await super().enqueue(job)

    driver = HangingDriver(clock)
    both = scheduler(driver, clock, NIGHTLY, EVERY_MINUTE, enqueue_timeout_ms=50)
    report = await asyncio.wait_for(both.run_pass(), timeout=2)
    assert report.failed == ["report.nightly:2026-10-16T03:00:00Z"]
    assert len(driver.requests) == 1  # not once more per schedule
    driver.hang = False
    report = await both.run_pass()
    assert [key for key, _ in report.queued] == [
        "report.nightly:2026-10-16T03:00:00Z",
        "tick:2026-10-16T02:59:00Z",  # 30 s ago: in the catch-up window
        "tick:2026-10-16T03:00:00Z",
    ]


async def test_the_loop_survives_an_unexpected_error(driver: RecordingDriver) -> None:
    class FlakyClock(ManualClock):
        calls = 0

        def now_ms(self) -> int:
            self.calls += 1
            if self.calls == 2:  # the first pass's first reading (the first is at start)
                raise RuntimeError("clock exploded")
            return super().now_ms()

    flaky = FlakyClock(ms("2026-10-16T02:59:30Z"))
    running = JobScheduler(JobQueue(driver), schedules=[NIGHTLY], clock=flaky, interval_ms=10)
    with captured_logs("ERROR") as logs:
        running.start()

        async def stored() -> bool:
            return (await driver.counts())["pending"] == 1

        await wait_until(stored)
    assert logs[0]["message"] == (
        "job scheduler pass failed: RuntimeError: clock exploded; retrying in 10 ms"
    )
    assert running.is_running
    await running.close()


async def test_start_stop_and_close_are_idempotent(
    driver: RecordingDriver, clock: ManualClock
) -> None:
    running = scheduler(driver, clock, NIGHTLY, interval_ms=20)
    running.start()
    running.start()
    await wait_until(lambda: len(driver.requests) >= 3)  # a pass at start, then every 20 ms
    running.stop()
    running.stop()
    assert not running.is_running
    await asyncio.sleep(0)
    running.start()  # restartable until closed
    assert running.is_running
    await running.close()
    await running.close()
    settled = len(driver.requests)
    await asyncio.sleep(0.06)
    assert len(driver.requests) == settled
    with pytest.raises(Exception, match="closed"):
        running.start()


async def test_with_no_schedules_it_runs_no_loop(
    driver: RecordingDriver, clock: ManualClock
) -> None:
    idle = scheduler(driver, clock)
    idle.start()
    assert idle.is_running
    assert idle.schedules == ()
    await idle.close()
    assert driver.requests == []
