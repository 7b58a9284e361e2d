"""FailureStreak: one line per failure naming the cause, one traceback per run, one recovery."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from loguru import logger

from jobs.errors import StoreUnavailableError
from jobs.failures import FailureStreak, describe_cause


@pytest.fixture
def records() -> Iterator[list[Any]]:
    """Loguru records written during the test, with the exception they carry."""
    kept: list[Any] = []
    handler_id = logger.add(lambda message: kept.append(message.record), level="DEBUG")
    yield kept
    logger.remove(handler_id)


def refused(port: int = 6391) -> StoreUnavailableError:
    try:
        try:
            raise ConnectionRefusedError(111, f"Connect call failed ('127.0.0.1', {port})")
        except OSError as exc:
            raise StoreUnavailableError(
                f"Redis is unavailable:\n  127.0.0.1:{port} refused"
            ) from exc
    except StoreUnavailableError as error:
        return error


def unique(text: str) -> RuntimeError:
    """An error whose cause no other test logged (a cause is explained once a minute)."""
    return RuntimeError(f"{text} ({uuid.uuid4().hex[:6]})")


def test_each_failure_names_the_cause_and_only_the_first_carries_the_traceback(
    records: list[Any],
) -> None:
    streak = FailureStreak("claiming jobs")
    for delay in (100, 200, 400):
        streak.failed(refused(6401), retry_in_ms=delay)
    messages = [record["message"] for record in records]
    cause = (
        "StoreUnavailableError: Redis is unavailable: 127.0.0.1:6401 refused (caused by "
        "ConnectionRefusedError: [Errno 111] Connect call failed ('127.0.0.1', 6401))"
    )
    assert messages == [
        f"claiming jobs failed: {cause}; retrying in 100 ms",
        f"claiming jobs failed (2 in a row): {cause}; retrying in 200 ms",
        f"claiming jobs failed (3 in a row): {cause}; retrying in 400 ms",
    ]
    assert [record["level"].name for record in records] == ["ERROR"] * 3
    assert [record["exception"] is not None for record in records] == [True, False, False]
    assert streak.count == 3
    assert streak.failing
    assert (
        records[0]["function"]
        == "test_each_failure_names_the_cause_and_only_the_first_carries_the_traceback"
    )


def test_one_cause_failing_several_streaks_is_explained_once(records: list[Any]) -> None:
    down = unique("down")
    for operation in ("claiming jobs", "extending leases", "queuing scheduled jobs"):
        FailureStreak(operation).failed(down, retry_in_ms=1)
    FailureStreak("settling jobs").failed(unique("another cause"), retry_in_ms=1)
    assert [record["exception"] is not None for record in records] == [True, False, False, True]


def test_a_recovery_is_one_line_and_starts_a_new_run(records: list[Any]) -> None:
    streak = FailureStreak("relaying outbox entries", level="WARNING", job_type="t")
    streak.succeeded()  # no run: nothing to say
    assert records == []
    down = unique("down")
    streak.failed(down, then="giving up on this batch")
    streak.failed(down, then="giving up on this batch")
    streak.succeeded()
    again = unique("down again")
    streak.failed(again, retry_in_ms=5)
    messages = [record["message"] for record in records]
    assert messages[1] == (
        f"relaying outbox entries failed (2 in a row): RuntimeError: {down}; "
        "giving up on this batch"
    )
    assert messages[2].startswith("relaying outbox entries works again after 2 failures (")
    assert records[2]["level"].name == "INFO"
    assert messages[3] == f"relaying outbox entries failed: RuntimeError: {again}; retrying in 5 ms"
    assert records[3]["exception"] is not None  # a new run: its first failure is explained
    assert all(record["extra"] == {"job_type": "t"} for record in records)
    assert not FailureStreak("x").failing


def test_a_fast_retrying_loop_logs_a_line_per_quiet_interval_after_the_first_few(
    records: list[Any],
) -> None:
    streak = FailureStreak("claiming jobs", quiet_ms=60_000)
    for _ in range(500):
        streak.failed(refused(), retry_in_ms=1)
    assert len(records) == 3
    assert streak.count == 500
    streak.succeeded()
    assert records[-1]["message"].startswith("claiming jobs works again after 500 failures")


def test_describe_cause_keeps_one_line_and_a_bounded_size() -> None:
    assert describe_cause(ValueError()) == "ValueError"
    assert describe_cause(ValueError("a\n\tb")) == "ValueError: a b"
    long = describe_cause(RuntimeError("x" * 5_000))
    assert len(long) == 500
    assert long.endswith("...")
    wrapped = StoreUnavailableError("the store is down: boom")
    wrapped.__cause__ = OSError("boom")
    assert describe_cause(wrapped) == "StoreUnavailableError: the store is down: boom"
