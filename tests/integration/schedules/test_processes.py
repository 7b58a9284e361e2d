"""Schedulers in separate processes on one store: each occurrence is queued and run once.

Every server is a whole application (scheduler, runner, handler) in its own process; they
share only the store. Simulated time (support.py) lets them all ask for one occurrence at the
same instant, and lets the slow scenario run ten minutes of schedule in half a minute.
"""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable

import pytest

from jobs import JobDriver, JobQueue
from jobs.schedule import occurrence_iso
from tests.stores import StoreTarget
from tests.support import wait_until

from .fleet import Fleet
from .support import JOB_TYPE, SIMULATED_START, ProcessOptions, SimulatedClock

MINUTE = 60_000


def key(minute: int) -> str:
    return f"{JOB_TYPE}:{occurrence_iso(SIMULATED_START + minute * MINUTE)}"


def has_counts(driver: JobDriver, **expected: int) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        counts = await driver.counts()
        return all(counts[state] == n for state, n in expected.items())  # type: ignore[index]

    return check


async def test_three_processes_queue_and_run_an_occurrence_once(
    store_target: StoreTarget, fleet: Fleet
) -> None:
    clock = SimulatedClock()
    driver = store_target.open(clock)
    try:
        await fleet.start([ProcessOptions(store_target, catch_up_ms=30_000) for _ in range(3)])
        # All three start their schedulers one second before the minute: each asks for it
        # (and, 30 s of catch-up, for nothing earlier).
        fleet.go(SIMULATED_START - 1_000, clock)
        await wait_until(
            has_counts(driver, completed=1, pending=1, active=0, failed=0),
            timeout=20,
            message="the occurrence run and the next one queued",
        )
        await fleet.stop()
        fleet.check_exits()

        queued = fleet.queued()
        assert sorted(queued) == [key(0), key(1)]
        assert all(len(ids) == 1 for ids in queued.values()), queued
        runs = fleet.runs()
        assert runs == {queued[key(0)][0]: 1}
        ran = await driver.get_job(queued[key(0)][0])
        assert ran is not None
        assert (ran.key, ran.state) == (key(0), "completed")
        assert await driver.counts() == {
            "pending": 1,
            "active": 0,
            "completed": 1,
            "failed": 0,
            "cancelled": 0,
        }
        queue = JobQueue(driver)
        assert await queue.enqueue(JOB_TYPE, key=key(0)) is None
        assert await queue.enqueue(JOB_TYPE, key=key(1)) is None
    finally:
        await driver.close()


@pytest.mark.slow
async def test_five_skewed_processes_with_a_kill_and_a_pause_run_each_minute_once(
    store_target: StoreTarget, fleet: Fleet
) -> None:
    """RELIABILITY S24: ten simulated minutes (20x), scheduler clocks skewed by -20 s, 0 and
    +20 s, one server SIGKILLed at 3:59, every server paused through minutes 6 and 7. The
    pause is caught up within the catch-up window (150 s here); every minute runs once."""
    rate = 20.0
    skews = [-20_000, 0, 20_000, 0, -20_000]
    options = [
        ProcessOptions(store_target, rate=rate, skew_ms=skew, interval_ms=500, catch_up_ms=150_000)
        for skew in skews
    ]
    clock = SimulatedClock(rate=rate)
    driver = store_target.open(clock)

    async def until(minute: float) -> None:
        target = SIMULATED_START + int(minute * MINUTE)
        await wait_until(lambda: clock.now_ms() >= target, timeout=60, interval=0.01)

    try:
        await fleet.start(options)
        fleet.go(SIMULATED_START - 5_000, clock)
        await until(3 + 59 / 60)
        fleet.signal(2, signal.SIGKILL)
        await until(6)
        for index in (0, 1, 3, 4):
            fleet.signal(index, signal.SIGSTOP)
        await until(8)
        for index in (0, 1, 3, 4):
            fleet.signal(index, signal.SIGCONT)
        await until(9.5)

        async def minute_nine_ran_and_ten_is_queued() -> bool:
            queued = fleet.queued()
            if key(10) not in queued or key(9) not in queued:
                return False
            info = await driver.get_job(queued[key(9)][0])
            return info is not None and info.state == "completed"

        await wait_until(minute_nine_ran_and_ten_is_queued, timeout=30, message="minute 9 run")
        await fleet.stop()
        fleet.check_exits(killed=frozenset({2}))

        queued = fleet.queued()
        assert all(len(ids) == 1 for ids in queued.values()), queued
        # At start the catch-up window (150 s, clocks up to 20 s ahead) takes in a minute or two
        # before the first; from there on, every minute once, with no gap.
        first = next(m for m in range(-3, 1) if key(m) in queued)
        last = max(m for m in range(first, 20) if key(m) in queued)
        assert last >= 10
        assert sorted(queued) == [key(m) for m in range(first, last + 1)]
        runs = fleet.runs()
        assert set(runs.values()) == {1}, runs
        ran_minutes = sorted(m for m in range(first, last + 1) if queued[key(m)][0] in runs)
        assert ran_minutes[: 10 - first] == list(range(first, 10))
        counts = await driver.counts()
        assert sum(counts.values()) == len(queued)
        assert counts["completed"] == len(runs)
        assert counts["failed"] == 0
    finally:
        await driver.close()
