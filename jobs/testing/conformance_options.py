"""Conformance: every bad option refused before any I/O, and nothing written.

``JobQueue`` checks a job's options once (``jobs.options``), whatever the driver; a driver
keeps a second line (``jobs.spi.support.check_request``) for a request that reached it some
other way. Both lines are run here on the harness's driver: each bad value raises
``JobOptionError`` naming the option, and the store holds no job afterwards.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from jobs.errors import JobOptionError
from jobs.new_job import NewJob
from jobs.options import (
    MAX_ATTEMPTS,
    MAX_DELAY_MS,
    MAX_PRIORITY,
    MAX_RUN_AT_MS,
    MAX_TIMEOUT_MS,
    MIN_PRIORITY,
)
from jobs.queue import JobQueue
from jobs.spi import JOB_STATES, JobDriver

from .helpers import ALL, LEASE_MS, DriverHarness
from .requests import new_request

BAD_OPTIONS: list[tuple[str, Any]] = [
    ("delay_ms", -1),
    ("delay_ms", 1.5),
    ("delay_ms", 5.0),
    ("delay_ms", math.nan),
    ("delay_ms", math.inf),
    ("delay_ms", 10**20),
    ("delay_ms", True),
    ("delay_ms", "5"),
    ("timeout_ms", 0),
    ("timeout_ms", 0.5),
    ("timeout_ms", math.nan),
    ("timeout_ms", -math.inf),
    ("timeout_ms", 2**63),
    ("timeout_ms", False),
    ("max_attempts", 0),
    ("max_attempts", 2.5),
    ("max_attempts", True),
    ("max_attempts", 2**31),
    ("max_attempts", math.nan),
    ("run_at", datetime(2030, 1, 1)),  # naive
    ("run_at", datetime(1969, 12, 31, tzinfo=UTC)),
    ("run_at", datetime(9999, 1, 1, tzinfo=UTC)),
    ("run_at", 1_700_000_000_000),
    ("run_at", "2030-01-01T00:00:00Z"),
    ("priority", 101),
    ("priority", -101),
    ("priority", 1.0),
    ("priority", True),
    ("priority", "5"),
]
"""(option, value) pairs every enqueue path refuses (``jobs.options`` has the ranges)."""

BAD_REQUESTS: list[tuple[str, Any]] = [
    ("delay_ms", math.nan),
    ("delay_ms", -5),
    ("delay_ms", 10**20),
    ("timeout_ms", math.nan),
    ("timeout_ms", 0.5),
    ("timeout_ms", 0),
    ("max_attempts", 2.5),
    ("max_attempts", True),
    ("max_attempts", 2**40),
    ("max_stalls", -1),
    ("max_stalls", math.inf),
    ("run_at_ms", math.nan),
    ("run_at_ms", -(2**63)),
    ("run_at_ms", 1e20),
    ("keep_until_ms", math.inf),
    ("priority", 101),
    ("priority", -(2**40)),
    ("priority", math.nan),
]
"""(field, value) pairs of a ``JobRequest`` that every driver's ``enqueue`` refuses."""


def _case_id(case: tuple[str, Any]) -> str:
    option, value = case
    return f"{option}={value!r}"


async def assert_nothing_written(driver: JobDriver) -> None:
    assert await driver.counts() == dict.fromkeys(JOB_STATES, 0)
    assert (await driver.list_jobs()).jobs == []
    assert await driver.claim(10, LEASE_MS, ALL) == []


class OptionsConformance:
    """Bad options: refused by the queue and by the driver, with nothing written."""

    @pytest.mark.parametrize("case", BAD_OPTIONS, ids=_case_id)
    async def test_the_queue_refuses_a_bad_option_and_writes_nothing(
        self, driver_harness: DriverHarness, case: tuple[str, Any]
    ) -> None:
        option, value = case
        driver = await driver_harness.driver()
        queue = JobQueue(driver)
        with pytest.raises(JobOptionError, match=option) as raised:
            await queue.enqueue("t", {"n": 1}, **{option: value})
        assert raised.value.option == option
        with pytest.raises(JobOptionError, match=option):
            await queue.enqueue_many(
                [NewJob(type="t", payload={"n": 0}), NewJob(type="t", **{option: value})]
            )
        await assert_nothing_written(driver)

    async def test_delay_ms_and_run_at_together_are_refused(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        with pytest.raises(JobOptionError, match="not both"):
            await JobQueue(driver).enqueue(
                "t", None, delay_ms=5, run_at=datetime.now(UTC) + timedelta(seconds=5)
            )
        await assert_nothing_written(driver)

    @pytest.mark.parametrize("case", BAD_REQUESTS, ids=_case_id)
    async def test_the_driver_refuses_a_bad_request_and_writes_nothing(
        self, driver_harness: DriverHarness, case: tuple[str, Any]
    ) -> None:
        if not getattr(driver_harness, "checks_requests", True):
            pytest.skip("this driver takes its requests from a JobQueue only")
        field, value = case
        driver = await driver_harness.driver()
        bad = new_request("t", {"n": 1}, **{field: value})
        with pytest.raises(JobOptionError, match=field):
            await driver.enqueue(bad)
        with pytest.raises(JobOptionError, match=field):
            await driver.enqueue_many([new_request("t", {"n": 0}), bad])
        await assert_nothing_written(driver)

    async def test_edge_values_are_stored_exactly(self, driver_harness: DriverHarness) -> None:
        """The ends of each range are taken and read back unchanged."""
        driver = await driver_harness.driver()
        queue = JobQueue(driver)
        now_ms = driver_harness.clock.now_ms()
        early = datetime(1970, 1, 1, tzinfo=UTC)
        late = early + timedelta(milliseconds=MAX_RUN_AT_MS - 1)
        east = timezone(timedelta(hours=14))
        cases: list[tuple[dict[str, Any], str, int]] = [
            ({"delay_ms": MAX_DELAY_MS}, "run_at_ms", now_ms + MAX_DELAY_MS),
            ({"delay_ms": 0}, "run_at_ms", now_ms),
            ({"run_at": late.astimezone(east)}, "run_at_ms", MAX_RUN_AT_MS - 1),
            ({"run_at": early}, "run_at_ms", 0),
            ({"timeout_ms": MAX_TIMEOUT_MS}, "timeout_ms", MAX_TIMEOUT_MS),
            ({"timeout_ms": 1}, "timeout_ms", 1),
            ({"max_attempts": MAX_ATTEMPTS}, "max_attempts", MAX_ATTEMPTS),
            ({"max_attempts": 1}, "max_attempts", 1),
            ({"priority": MAX_PRIORITY}, "priority", MAX_PRIORITY),
            ({"priority": MIN_PRIORITY}, "priority", MIN_PRIORITY),
        ]
        for options, field, expected in cases:
            job_id = await queue.enqueue("t", None, **options)
            assert job_id is not None
            info = await driver.get_job(job_id)
            assert info is not None
            if field == "run_at_ms":
                got = (info.run_at - early) // timedelta(milliseconds=1)
            else:
                got = getattr(info, field)
            assert got == expected, f"{options}: {field} {got} != {expected}"
