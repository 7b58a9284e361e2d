"""The option checks (jobs.options): types, ranges, messages, and every place that runs them."""

from __future__ import annotations

import enum
import math
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import BaseModel

from jobs import JobOptionError, JobsSettings, RetryLater, define_job, job_handler
from jobs.handlers import JobHandlerRegistry
from jobs.inprocess import InProcessJobDriver
from jobs.new_job import NewJob
from jobs.options import (
    MAX_ATTEMPTS,
    MAX_DELAY_MS,
    MAX_RUN_AT_MS,
    MAX_STALLS,
    MAX_TIMEOUT_MS,
    check_delay_ms,
    check_max_attempts,
    check_max_stalls,
    check_request,
    check_run_at,
    check_timeout_ms,
)
from jobs.queue import JobQueue
from jobs.testing import new_request


class Receipt(BaseModel):
    n: int


class Three(enum.IntEnum):
    THREE = 3


def test_each_check_takes_the_ends_of_its_range() -> None:
    assert check_delay_ms(0) == 0
    assert check_delay_ms(MAX_DELAY_MS) == MAX_DELAY_MS
    assert check_timeout_ms(1) == 1
    assert check_timeout_ms(MAX_TIMEOUT_MS) == MAX_TIMEOUT_MS
    assert check_max_attempts(1) == 1
    assert check_max_attempts(MAX_ATTEMPTS) == MAX_ATTEMPTS
    assert check_max_stalls(0) == 0
    assert check_max_stalls(MAX_STALLS) == MAX_STALLS
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    assert check_run_at(epoch) == 0
    assert check_run_at(epoch + timedelta(milliseconds=MAX_RUN_AT_MS - 1)) == MAX_RUN_AT_MS - 1


def test_an_int_subclass_is_taken_as_its_value() -> None:
    value = check_max_attempts(Three.THREE)
    assert value == 3
    assert type(value) is int


@pytest.mark.parametrize(
    ("check", "value", "shown"),
    [
        (check_delay_ms, -1, "got -1"),
        (check_delay_ms, MAX_DELAY_MS + 1, "from 0 to 315_360_000_000 (10 years)"),
        (check_delay_ms, 5.0, "got 5.0 (a float)"),
        (check_delay_ms, math.nan, "got nan (a float)"),
        (check_delay_ms, True, "got True (a bool)"),
        (check_delay_ms, "5", "got '5' (a str)"),
        (check_delay_ms, None, "got None (a NoneType)"),
        pytest.param(check_delay_ms, 10**5000, "got an int of 16610 bits", id="huge-int"),
        (check_timeout_ms, 0, "from 1 to 604_800_000 (7 days)"),
        (check_timeout_ms, 0.5, "got 0.5 (a float)"),
        (check_max_attempts, 2.5, "got 2.5 (a float)"),
        (check_max_attempts, 0, "from 1 to 10_000"),
        (check_max_stalls, -1, "from 0 to 10_000"),
    ],
)
def test_a_refusal_names_the_option_the_value_and_the_range(
    check: Any, value: Any, shown: str
) -> None:
    with pytest.raises(JobOptionError) as raised:
        check(value)
    message = str(raised.value)
    assert shown in message
    option = check.__name__.removeprefix("check_")
    assert message.startswith(f"{option} must be an int from ")
    assert raised.value.option == option
    assert raised.value.value is value
    assert isinstance(raised.value, ValueError)


def test_a_long_value_is_shown_cut_short() -> None:
    with pytest.raises(JobOptionError) as raised:
        check_delay_ms("x" * 10_000)
    assert len(str(raised.value)) < 200


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (datetime(2030, 1, 1), "must be timezone-aware"),
        (datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC), "from 1970-01-01T00:00:00Z"),
        (datetime(2500, 1, 1, tzinfo=UTC), "before 2500-01-01T00:00:00Z"),
        (datetime.max.replace(tzinfo=timezone(timedelta(hours=-23))), "before 2500"),
        (datetime.min.replace(tzinfo=timezone(timedelta(hours=23))), "from 1970"),
        (1_700_000_000_000, "must be a timezone-aware datetime, got 1700000000000"),
        ("2030-01-01", "must be a timezone-aware datetime, got '2030-01-01' (a str)"),
    ],
)
def test_run_at_is_an_aware_datetime_in_range(value: Any, shown: str) -> None:
    with pytest.raises(JobOptionError, match="run_at") as raised:
        check_run_at(value)
    assert shown in str(raised.value)


def test_run_at_in_any_zone_is_the_same_instant() -> None:
    utc = datetime(2030, 5, 1, 12, 0, 0, 123_456, tzinfo=UTC)
    east = utc.astimezone(timezone(timedelta(hours=5, minutes=30)))
    assert check_run_at(utc) == check_run_at(east) == 1_903_867_200_123


@pytest.mark.parametrize(
    "options",
    [
        {"max_attempts": 2.5},
        {"max_attempts": True},
        {"max_attempts": 0},
        {"timeout_ms": 0.5},
        {"timeout_ms": math.inf},
        {"max_stalls": -1},
        {"max_stalls": 1.0},
        {"priority": 101},
        {"priority": 1.0},
        {"concurrency": 0},
        {"concurrency": True},
    ],
)
def test_handler_options_are_refused_at_decoration(options: dict[str, Any]) -> None:
    [option] = options
    with pytest.raises(JobOptionError, match=f"{option} of handler 'x'"):
        job_handler("x", **options)
    with pytest.raises(JobOptionError, match=f"{option} of handler 'x'"):
        JobHandlerRegistry().register("x", lambda payload: None, **options)


@pytest.mark.parametrize(
    "options",
    [{"max_attempts": 2.5}, {"timeout_ms": -1}, {"max_stalls": math.nan}, {"priority": -101}],
)
def test_definition_options_are_refused(options: dict[str, Any]) -> None:
    [option] = options
    with pytest.raises(JobOptionError, match=f"{option} of job 'r'"):
        define_job("r", Receipt, **options)


def test_settings_and_retry_later_are_checked() -> None:
    with pytest.raises(JobOptionError, match="max_stalls of JobsSettings"):
        JobsSettings(max_stalls=-1)
    with pytest.raises(JobOptionError, match="delay_ms of RetryLater"):
        RetryLater(delay_ms=1.5)  # type: ignore[arg-type]
    assert RetryLater(delay_ms=MAX_DELAY_MS).delay_ms == MAX_DELAY_MS


async def test_enqueue_many_names_the_job_with_a_bad_option() -> None:
    queue = JobQueue(InProcessJobDriver())
    batch = [NewJob(type="t"), NewJob(type="t", timeout_ms=0.5)]  # type: ignore[arg-type]
    with pytest.raises(JobOptionError, match="timeout_ms") as raised:
        await queue.enqueue_many(batch)
    assert raised.value.__notes__ == ["in job 1 of the batch; nothing was enqueued"]


def test_check_request_is_the_drivers_second_line() -> None:
    check_request(new_request("t", max_stalls=0, run_at_ms=0, keep_until_ms=MAX_RUN_AT_MS - 1))
    with pytest.raises(JobOptionError, match=r"timeout_ms of job \w+ must be an int"):
        check_request(new_request("t", timeout_ms=math.nan))
    with pytest.raises(JobOptionError, match="run_at_ms"):
        check_request(new_request("t", run_at_ms=MAX_RUN_AT_MS))


async def test_max_stalls_comes_from_the_handler_then_the_definition_then_the_settings() -> None:
    registry = JobHandlerRegistry()
    registry.register("own", lambda payload: None, max_stalls=2)
    registry.register(define_job("typed", Receipt, max_stalls=4), lambda payload: None)
    queue = JobQueue(InProcessJobDriver(), settings=JobsSettings(max_stalls=7), registry=registry)
    assert queue.build_request("own").max_stalls == 2
    # the handler of "typed" took its definition's max_stalls: it governs
    assert queue.build_request(define_job("typed", Receipt), {"n": 1}).max_stalls == 4
    assert queue.build_request(define_job("other", Receipt, max_stalls=4), {"n": 1}).max_stalls == 4
    assert queue.build_request("typed", {"n": 1}).max_stalls == 4
    assert queue.build_request("plain").max_stalls == 7
    assert JobQueue(InProcessJobDriver()).build_request("plain").max_stalls == 10
